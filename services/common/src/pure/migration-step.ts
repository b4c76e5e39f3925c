/** One migration being applied to a file (`ms`: how long it took, once done). */
export interface MigrationStep {
  label: string;
  path: string;
  version: number;
  name: string;
  phase: "start" | "done";
  ms?: number;
}

/** What to tell the operator about a migration step (the gateway logs it, the CLI prints it to stderr). */
export function migrationMessage(step: MigrationStep): string {
  const what = `${step.label} at ${step.path} to schema version ${step.version} (${step.name})`;
  if (step.phase === "start") {
    return `upgrading ${what}: once, after installing a newer hermes; a large file takes a while. If it is interrupted nothing is lost: it runs again at the next start.`;
  }
  return `upgraded ${what} in ${((step.ms ?? 0) / 1000).toFixed(1)} s`;
}
