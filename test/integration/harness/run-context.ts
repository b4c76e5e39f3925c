// What the global setup hands to every integration test file (vitest provide/inject), and the
// labels that mark every Docker resource a run creates so leftovers can be swept by owner.
import { inject } from "vitest";

export interface IntegrationRun {
  /** Short random id of this vitest run; part of every resource name. */
  runId: string;
  /** host/pid/start-time of the vitest main process; the sweep removes resources of dead owners. */
  owner: string;
  baseImage: string;
  appImage: string;
  /** etcd of Debian's etcd-server package on the base image (harness/etcd.ts runs clusters of it). */
  etcdImage: string;
  /** true when `hermes gateway start --help` works in the app image (the real CLI is built). */
  realCli: boolean;
  /** Directory where container logs are written at teardown. */
  logDir: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    hermesIntegration: IntegrationRun;
  }
}

export const LABEL = {
  /** Present on every resource the harness creates. */
  marker: "org.hermes-mesh.it",
  owner: "org.hermes-mesh.it.owner",
  run: "org.hermes-mesh.it.run",
} as const;

export function runLabels(run: IntegrationRun): Record<string, string> {
  return { [LABEL.marker]: "1", [LABEL.owner]: run.owner, [LABEL.run]: run.runId };
}

export function currentRun(): IntegrationRun {
  const run = inject("hermesIntegration");
  if (!run) {
    throw new Error(
      "integration run context missing: run these tests through the vitest 'integration' project (its globalSetup builds the images)",
    );
  }
  return run;
}
