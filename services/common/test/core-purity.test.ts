import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

/**
 * The core is pure at run time, not only in its source: importing every core module (and
 * `@hermes/common/pure`, and @hermes/contract) in a fresh process resolves nothing but other core
 * modules, the pure part of @hermes/common, @hermes/contract, zod, croner and node:crypto (hashing). Everything else a module could reach
 * (node:fs, node:net, better-sqlite3, grpc-js, pino, prom-client, yaml, ws, the `@hermes/common`
 * server barrel, a shell module) is a violation. It runs the built code (the process project builds
 * first), the form the daemons run. The biome rule in biome.json says the same at lint time.
 */

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const RECORDER = fileURLToPath(new URL("./support/import-recorded.mjs", import.meta.url));

const ALLOWED_PACKAGES = /(^|\/)node_modules\/(zod|croner)\//;
const ALLOWED_BUILTINS = new Set(["node:crypto"]);
const allowedUrl = (url: string): boolean => {
  if (ALLOWED_BUILTINS.has(url)) return true;
  if (!url.startsWith("file:")) return false;
  const path = relative(ROOT, fileURLToPath(url));
  return (
    isCorePath(path) ||
    path.startsWith("services/common/dist/pure/") ||
    path.startsWith("services/contract/dist/") ||
    ALLOWED_PACKAGES.test(path)
  );
};

/** A core module's path: a `core/` folder of a service, at the top of its `src/` (`dist/`) or inside a domain. */
const isCorePath = (path: string): boolean => /^services\/[^/]+\/(src|dist)\/([\w-]+\/)*core\//.test(path);

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts") && !f.endsWith(".d.ts"))
    .map((f) => join(dir, f));
}

/** The built module of every pure source file (only those with a source: a stale build output is not imported). */
function pureModules(): string[] {
  const services = readdirSync(join(ROOT, "services"));
  const sources = [
    ...services.flatMap((s) => sourceFiles(join(ROOT, "services", s, "src")).filter((f) => isCorePath(relative(ROOT, f)))),
    ...sourceFiles(join(ROOT, "services/common/src/pure")),
    ...sourceFiles(join(ROOT, "services/contract/src")),
  ];
  return sources.map((src) => src.replace(/\/src\//, "/dist/").replace(/\.ts$/, ".js"));
}

interface Resolution {
  specifier: string;
  parent: string | null;
  url: string;
}

const scratch = mkdtempSync(join(tmpdir(), "hermes-purity-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Imports `modules` in a fresh node process and returns every resolution it made. */
function importRecorded(modules: string[], name: string): Resolution[] {
  const logFile = join(scratch, `${name}.jsonl`);
  const child = spawnSync(process.execPath, [RECORDER, logFile, ...modules], { cwd: ROOT, encoding: "utf8", timeout: 60_000 });
  expect(child.status, `importing the modules failed:\n${child.stderr}`).toBe(0);
  return readFileSync(logFile, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Resolution);
}

const shown = (url: string | null) => (url?.startsWith("file:") ? relative(ROOT, fileURLToPath(url)) : String(url));

/** Every resolution of a module outside the allowed set, as "importer imports specifier (resolved file)". */
function disallowed(resolutions: Resolution[]): string[] {
  const found = resolutions.filter((r) => !allowedUrl(r.url)).map((r) => `${shown(r.parent)} imports ${r.specifier} (${shown(r.url)})`);
  return [...new Set(found)].sort();
}

/**
 * The disallowed imports made by allowed modules: where a chain first leaves the pure set. None
 * means nothing outside the set was loaded at all, and it names the culprit, not what it dragged in.
 */
function boundaryCrossings(resolutions: Resolution[]): string[] {
  return disallowed(resolutions.filter((r) => r.parent === pathToFileURL(RECORDER).href || (r.parent !== null && allowedUrl(r.parent))));
}

describe("core purity at run time", () => {
  it("importing every core module loads no I/O package, no server part of @hermes/common and no shell module", () => {
    const modules = pureModules();
    const missing = modules.filter((m) => !existsSync(m));
    expect(missing, "core modules without a build output: run `npx tsc -b tsconfig.build.json`").toEqual([]);
    // Every service with a core takes part (the list is read from the tree, so a new core module joins by itself).
    const services = new Set(modules.map((m) => relative(ROOT, m).split("/")[1]));
    expect([...services].sort()).toEqual(["common", "contract", "coordinator", "gateway", "relay"]);

    const resolutions = importRecorded(modules, "core");
    // The recorder saw the imports: each module was resolved, and so were the pure part and zod.
    const resolved = new Set(resolutions.map((r) => r.url));
    expect(modules.filter((m) => !resolved.has(pathToFileURL(m).href))).toEqual([]);
    expect(resolutions.some((r) => r.specifier === "@hermes/common/pure")).toBe(true);
    expect(resolutions.some((r) => r.specifier === "@hermes/contract")).toBe(true);
    expect(boundaryCrossings(resolutions)).toEqual([]);
  });

  it("the check sees what the @hermes/common server barrel loads", () => {
    // The control: the same recorder and rule applied to the barrel a core module must not import.
    const barrel = importRecorded([join(ROOT, "services/common/dist/index.js")], "barrel");
    const found = disallowed(barrel).join("\n");
    for (const io of ["@grpc/grpc-js", "better-sqlite3", "pino", "prom-client", "yaml", "node:fs", "node:http", "node:net"]) {
      expect(found).toContain(` imports ${io} (`);
    }
  });
});
