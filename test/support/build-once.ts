import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import buildConsole from "./build-console.js";

/**
 * Vitest global setup: tests that start real `hermes` processes run the built code, so build it
 * (incremental `tsc -b`, about a second when nothing changed, and the console when its sources
 * changed) once before any test file runs.
 */
export default function setup(): void {
  const root = fileURLToPath(new URL("../..", import.meta.url));
  execFileSync(
    process.execPath,
    [fileURLToPath(new URL("../../node_modules/typescript/bin/tsc", import.meta.url)), "-b", "tsconfig.build.json"],
    {
      cwd: root,
      stdio: "inherit",
    },
  );
  buildConsole();
}
