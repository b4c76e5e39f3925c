import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

/**
 * Vitest global setup of the projects whose gateways serve the web console (in process or as
 * `hermes` processes): build the console when its sources are newer than its dist/ (vite; nothing
 * to do, in a few milliseconds, otherwise), so no test runs against a stale console.
 */
export default function buildConsole(): void {
  execFileSync(process.execPath, [fileURLToPath(new URL("../../services/console/build.mjs", import.meta.url)), "--if-stale"], {
    cwd: fileURLToPath(new URL("../..", import.meta.url)),
    stdio: "inherit",
  });
}
