import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import config from "../vitest.config.js";
import { CORE_TOOL_RUNS, SERVICE_PROCESS_HELPERS, TEST_FILES } from "./projects.js";

/**
 * Every test file runs in the project that what it does puts it in (test/projects.ts says which
 * is which), judged by what its imports load, followed through the repository's own modules:
 * - a test-side module (a test file, or a helper under a `test/` folder) that imports
 *   node:child_process starts processes: `process` (unless test/projects.ts names it as a helper
 *   for a dependency such as etcd, or as a core test's one short tool run);
 * - anything else that loads a server, database or network package: `service`;
 * - the rest: `core`.
 */

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Packages that mean a server, a database, the network or a process. */
const SERVER_PACKAGES = new Set([
  "node:child_process",
  "node:net",
  "node:http",
  "node:https",
  "node:http2",
  "node:dgram",
  "better-sqlite3",
  "@grpc/grpc-js",
  "@grpc/proto-loader",
  "@grpc/reflection",
  "ws",
  "etcd3",
  "grammy",
  "testcontainers",
]);

type Project = "core" | "service" | "process";

interface ProjectConfig {
  test: { name: string; include?: string[]; exclude?: string[]; globalSetup?: string | string[] };
}
const projects = (config.test?.projects ?? []) as ProjectConfig[];

/** A glob of the simple kind the config uses (`*`, `**`), as a regular expression over `/` paths. */
function globRegExp(glob: string): RegExp {
  let source = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === "*" && glob[i + 1] === "*") {
      const slash = glob[i + 2] === "/";
      source += slash ? "(?:.*/)?" : ".*";
      i += slash ? 2 : 1;
    } else if (c === "*") source += "[^/]*";
    else source += c.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${source}$`);
}
const matchesAny = (file: string, globs: readonly string[] = []) => globs.some((g) => globRegExp(g).test(file));

function projectsOf(file: string): string[] {
  return projects.filter((p) => matchesAny(file, p.test.include) && !matchesAny(file, p.test.exclude)).map((p) => p.test.name);
}

function walk(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    if (entry.name === "node_modules" || entry.name === "dist" || entry.name.startsWith(".")) continue;
    const path = dir === "" ? entry.name : `${dir}/${entry.name}`;
    if (entry.isDirectory()) walk(path, out);
    else if (entry.name.endsWith(".test.ts")) out.push(path);
  }
  return out;
}
const testFiles = walk("").filter((f) => matchesAny(f, TEST_FILES));

// ---- the import graph -------------------------------------------------------------------------

const aliases = (config.resolve?.alias ?? []) as { find: RegExp; replacement: string }[];

/** The repository file `specifier` names from `from`, or undefined for a package. */
function resolveLocal(from: string, specifier: string): string | undefined {
  for (const { find, replacement } of aliases) if (find.test(specifier)) return relative(ROOT, specifier.replace(find, replacement));
  if (!specifier.startsWith(".")) return undefined;
  const path = resolve(ROOT, dirname(from), specifier);
  for (const candidate of [path.replace(/\.js$/, ".ts"), path, `${path}.ts`]) {
    if (existsSync(candidate) && statSync(candidate).isFile()) return relative(ROOT, candidate).split(sep).join("/");
  }
  throw new Error(`${from}: cannot resolve ${specifier}`);
}

/** The modules a file loads when it runs: static imports and re-exports (not type-only ones) and dynamic `import()`. */
function loadedSpecifiers(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(join(ROOT, file), "utf8"), ts.ScriptTarget.Latest);
  const out: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const bindings = clause?.namedBindings;
      const onlyTypes =
        clause !== undefined &&
        (clause.isTypeOnly ||
          (clause.name === undefined &&
            bindings !== undefined &&
            ts.isNamedImports(bindings) &&
            bindings.elements.every((e) => e.isTypeOnly)));
      if (!onlyTypes) out.push(node.moduleSpecifier.text);
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      if (!node.isTypeOnly) out.push(node.moduleSpecifier.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [arg] = node.arguments;
      if (arg && ts.isStringLiteral(arg)) out.push(arg.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

const edges = new Map<string, { local: string[]; packages: string[] }>();
function edgesOf(file: string) {
  let e = edges.get(file);
  if (!e) {
    e = { local: [], packages: [] };
    for (const specifier of loadedSpecifiers(file)) {
      const local = resolveLocal(file, specifier);
      if (local !== undefined) e.local.push(local);
      else e.packages.push(specifier);
    }
    edges.set(file, e);
  }
  return e;
}

/** Every repository module a test loads, with the packages each imports. */
function reach(test: string): Map<string, string[]> {
  const seen = new Map<string, string[]>();
  const stack = [test];
  while (stack.length > 0) {
    const file = stack.pop()!;
    if (seen.has(file)) continue;
    const { local, packages } = edgesOf(file);
    seen.set(file, packages);
    stack.push(...local);
  }
  return seen;
}

const isTestSide = (file: string) => file.endsWith(".test.ts") || /(^|\/)test\//.test(file);

/** Where a test belongs by what it loads, and why. */
function belongs(test: string): { project: Project; why: string } {
  const modules = reach(test);
  const starters = [...modules]
    .filter(([file, packages]) => isTestSide(file) && packages.includes("node:child_process"))
    .map(([file]) => file)
    .filter((file) => !(file in SERVICE_PROCESS_HELPERS) && !(file === test && test in CORE_TOOL_RUNS));
  if (starters.length > 0) return { project: "process", why: `starts processes (${starters.join(", ")})` };
  for (const [file, packages] of modules) {
    const server = packages.find((p) => SERVER_PACKAGES.has(p) && !(p === "node:child_process" && file === test && test in CORE_TOOL_RUNS));
    if (server) return { project: "service", why: `loads ${server} (${file})` };
  }
  return { project: "core", why: "loads no server, database or process" };
}

// ---- the checks -------------------------------------------------------------------------------

describe("test projects", () => {
  it("finds the test files and the three projects", () => {
    expect(testFiles.length).toBeGreaterThan(100);
    expect(projects.map((p) => p.test.name)).toEqual(expect.arrayContaining(["core", "service", "process", "integration"]));
  });

  it("puts every test file in exactly one project", () => {
    const misplaced = testFiles.map((f) => ({ f, in: projectsOf(f) })).filter((x) => x.in.length !== 1);
    expect(misplaced.map((x) => `${x.f}: ${x.in.length === 0 ? "no project" : x.in.join(" and ")}`)).toEqual([]);
  });

  it("puts every test file in the project of what it does", () => {
    const wrong: string[] = [];
    for (const file of testFiles) {
      const [assigned] = projectsOf(file);
      const { project, why } = belongs(file);
      if (assigned !== project) wrong.push(`${file}: in ${assigned}, belongs in ${project}: it ${why}`);
    }
    expect(wrong, "move the file's entry in test/projects.ts").toEqual([]);
  });

  it("builds first only where tests run the built code", () => {
    const withSetup = projects.filter((p) => [p.test.globalSetup ?? []].flat().some((s) => s.includes("build-once")));
    expect(withSetup.map((p) => p.test.name)).toEqual(["process"]);
  });

  it("names only existing files as exceptions", () => {
    for (const file of [...Object.keys(CORE_TOOL_RUNS), ...Object.keys(SERVICE_PROCESS_HELPERS)])
      expect(existsSync(join(ROOT, file)), file).toBe(true);
  });
});
