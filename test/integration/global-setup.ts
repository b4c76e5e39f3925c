// Global setup of the vitest "integration" project:
//   1. make sure a Docker engine answers (scripts/ensure-docker.sh installs/starts dockerd on Debian as root);
//   2. sweep resources left by earlier runs that died (owner process gone);
//   3. build the offline images, app and etcd (infra/image/build-images.mjs; cached by input hash, ~2 s when unchanged);
//   4. find out whether the image runs the real `hermes` CLI;
//   5. hand the run context to the test files (inject("hermesIntegration")).
// Teardown removes everything this run created, even what a crashed test file left behind.
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { TestProject } from "vitest/node";
import type { IntegrationRun } from "./harness/run-context.js";
import { describeSweep, ownerIsAlive, processOwner, sweep } from "./harness/sweep.js";

const REPO = resolve(fileURLToPath(new URL("../..", import.meta.url)));
const say = (msg: string) => process.stderr.write(`[integration] ${msg}\n`);

interface BuildResult {
  baseImage: string;
  appImage: string;
  appBuilt: boolean;
  etcdImage: string;
  etcdBuilt: boolean;
  etcdVersion: string;
  cliEntry: boolean;
  problems: string[];
  timings: Record<string, number>;
}

function realCliWorks(appImage: string): boolean {
  const res = spawnSync("docker", ["run", "--rm", "--network", "none", appImage, "gateway", "start", "--help"], {
    encoding: "utf8",
    timeout: 30_000,
  });
  return res.status === 0;
}

export default function setup(project: TestProject) {
  // Also in vitest.config.ts (for the test workers); set here for anything this process starts.
  process.env.TESTCONTAINERS_RYUK_DISABLED ??= "true";
  process.env.TESTCONTAINERS_HOST_OVERRIDE ??= "localhost";

  const started = Date.now();
  execFileSync("bash", [join(REPO, "scripts/ensure-docker.sh")], { stdio: ["ignore", "inherit", "inherit"] });

  const owner = processOwner();
  const sweepAll = process.env.HERMES_IT_SWEEP_ALL === "1";
  const before = sweep((o) => o !== owner && (sweepAll || !ownerIsAlive(o)));
  if (before.containers + before.networks + before.volumes > 0) say(`[sweep:before] removed ${describeSweep(before)} left by dead runs`);

  const build = spawnSync(process.execPath, [join(REPO, "infra/image/build-images.mjs"), "--json"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  if (build.status !== 0) throw new Error("building the integration images failed (see the [build-*] lines above)");
  const images = JSON.parse(build.stdout) as BuildResult;

  const realCli = images.cliEntry && realCliWorks(images.appImage);
  if (!realCli)
    say("the app image cannot run `hermes gateway start --help` yet: scenarios that need the real daemons will use the stand-in or fail");

  const runId = randomBytes(3).toString("hex");
  const logDir = join(tmpdir(), "hermes-it", runId);
  mkdirSync(logDir, { recursive: true });
  const run: IntegrationRun = {
    runId,
    owner,
    baseImage: images.baseImage,
    appImage: images.appImage,
    etcdImage: images.etcdImage,
    realCli,
    logDir,
  };
  project.provide("hermesIntegration", run);
  say(
    `run ${runId}: ${images.appImage} (${images.appBuilt ? "rebuilt" : "cached"}), ${images.etcdImage} (etcd ${images.etcdVersion}, ${images.etcdBuilt ? "rebuilt" : "cached"}), real CLI ${realCli ? "yes" : "no"}, setup ${Date.now() - started} ms, container logs in ${logDir}`,
  );

  return () => {
    const after = sweep((o) => o === owner);
    say(`[sweep:after] removed ${describeSweep(after)}; container logs in ${logDir}`);
  };
}
