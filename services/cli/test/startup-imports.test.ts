import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assertBuilt, hermes, removeHome, tempHome } from "./support/cli-harness.js";

/**
 * What a command loads before it does anything: the packages below cost 50-300 ms of start-up
 * each, so the help, which needs none of them, must not load them, and a command on HERMES_HOME
 * must not load the whole gateway. The modules are recorded by resolution hooks in the CLI's own process.
 */
const RECORD_LOADS = fileURLToPath(new URL("./support/record-loads.mjs", import.meta.url));

/** Packages the help never needs: validation, YAML, SQLite, logging, metrics, etcd, Telegram, WebSocket. */
const HEAVY_PACKAGES = ["zod", "yaml", "better-sqlite3", "pino", "prom-client", "etcd3", "grammy", "ws"];

let home: string;
beforeAll(() => {
  assertBuilt();
  home = tempHome();
});
afterAll(() => removeHome(home));

/** The package names and our own dist files a `hermes ARGS…` run loaded. */
async function loadsOf(args: string[]): Promise<{ packages: Set<string>; ownFiles: string[] }> {
  const log = join(home, `loads-${args.join("-")}.txt`);
  const nodeOptions = `${process.env.NODE_OPTIONS ?? ""} --import=${RECORD_LOADS}`.trim();
  const run = await hermes(args, { home, env: { NODE_OPTIONS: nodeOptions, HERMES_TEST_LOADS: log } });
  expect(run.code, run.stderr).toBe(0);
  const urls = readFileSync(log, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => (JSON.parse(line) as { url: string }).url);
  const packages = new Set<string>();
  const ownFiles: string[] = [];
  for (const url of urls) {
    const inModules = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
    if (inModules) packages.add(inModules[1]!);
    else if (url.includes("/services/")) ownFiles.push(url.slice(url.indexOf("/services/") + 1));
  }
  return { packages, ownFiles };
}

describe("CLI start-up", () => {
  it("hermes --help loads neither the gateway package's entries nor a heavy package", async () => {
    const { packages, ownFiles } = await loadsOf(["--help"]);
    expect(packages.has("commander")).toBe(true); // the hook saw the run
    expect(HEAVY_PACKAGES.filter((name) => packages.has(name))).toEqual([]);
    // Of the gateway package only the pure ops core (the check's thresholds) and the home's paths.
    expect(
      ownFiles.filter(
        (file) => file.startsWith("services/gateway/") && !/^services\/gateway\/dist\/(ops\/core\/|home\/store\/home\.js$)/.test(file),
      ),
    ).toEqual([]);
  });

  it("a command on HERMES_HOME itself loads the direct entry, not the whole gateway package", async () => {
    const { ownFiles } = await loadsOf(["profile", "list"]);
    expect(ownFiles).toContain("services/gateway/dist/direct.js");
    expect(
      ownFiles.filter((file) => file === "services/gateway/dist/index.js" || file.startsWith("services/gateway/dist/daemon/")),
    ).toEqual([]);
  });
});
