import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import ts from "typescript";

/**
 * Source checks of a service's shape: which layer folder imports which, and where SQL is written.
 * They read the TypeScript sources (never the build), with the compiler's own parser, so comments
 * and text that merely looks like an import or a query are not mistaken for one.
 */

/** The non-test sources under `root` (a service's `src/`), as paths relative to it with `/`. */
export function serviceSources(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts") && !entry.name.endsWith(".d.ts")) {
        out.push(relative(root, path).split(sep).join("/"));
      }
    }
  };
  walk(root);
  return out.sort();
}

/**
 * The layer folders a service's sources sit in. A service's `src/` is cut by domain first
 * (`rooms/`, `delivery/`, `platforms/telegram/adapters/`, …), then by layer inside each domain
 * (`rooms/core/`, `rooms/store/`, …); the transports shared by every domain sit in a top-level
 * `api/` and the composition root in `daemon/`.
 */
export const LAYER_FOLDERS = ["core", "store", "adapters", "app", "api", "daemon"] as const;

/** The domain and layer of a source: `rooms/app/room-log.ts` → `{domain: "rooms", layer: "app"}` (`""` for a file at the top, such as index.ts). */
export function sliceOf(file: string): { domain: string; layer: string } {
  const parts = file.split("/");
  const at = parts.findIndex((part, i) => i < parts.length - 1 && (LAYER_FOLDERS as readonly string[]).includes(part));
  if (at < 0) return { domain: parts.length > 1 ? parts.slice(0, -1).join("/") : "", layer: parts.length > 1 ? "?" : "" };
  return { domain: parts.slice(0, at).join("/"), layer: parts[at]! };
}

/** The layer of a source (see sliceOf). */
export function layerOf(file: string): string {
  return sliceOf(file).layer;
}

export interface ImportEdge {
  /** The importing file, relative to `src/`. */
  from: string;
  /** The specifier as written. */
  specifier: string;
  /** For a relative specifier: the imported file relative to `src/` (outside it: starts with `../`). */
  target?: string;
}

/** Every import, `export … from` and dynamic `import()` of every source under `root`. */
export function importEdges(root: string): ImportEdge[] {
  const edges: ImportEdge[] = [];
  for (const file of serviceSources(root)) {
    const text = readFileSync(join(root, file), "utf8");
    for (const imported of ts.preProcessFile(text, true, true).importedFiles) {
      const specifier = imported.fileName;
      if (!specifier.startsWith(".")) {
        edges.push({ from: file, specifier });
        continue;
      }
      const target = relative(root, resolve(root, dirname(file), specifier))
        .split(sep)
        .join("/");
      edges.push({ from: file, specifier, target });
    }
  }
  return edges;
}

/** Text of SQL statements (our SQL is written in upper case, as everywhere in the stores). */
const SQL_TEXT =
  /\b(SELECT\b[\s\S]*\bFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX|UNIQUE\s+INDEX)|DROP\s+(TABLE|INDEX)|ALTER\s+TABLE|PRAGMA\s+\w+)\b/;
/** better-sqlite3 calls that take SQL text, and @hermes/common's cached `statement(db, sql)`. */
const SQL_METHODS = new Set(["prepare", "exec", "pragma"]);

export interface SqlSite {
  file: string;
  line: number;
  text: string;
}

/** String literals holding SQL, and SQL-taking calls with literal text, in the sources under `root` outside `store/`. */
export function sqlOutsideStore(root: string): SqlSite[] {
  const sites: SqlSite[] = [];
  for (const file of serviceSources(root)) {
    if (layerOf(file) === "store") continue;
    const source = ts.createSourceFile(file, readFileSync(join(root, file), "utf8"), ts.ScriptTarget.Latest, true);
    const report = (node: ts.Node, text: string) =>
      sites.push({ file, line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1, text: text.slice(0, 80) });
    const visit = (node: ts.Node) => {
      if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
        if (SQL_TEXT.test(node.text)) report(node, node.text);
      } else if (ts.isTemplateExpression(node)) {
        const text = [node.head.text, ...node.templateSpans.map((s) => s.literal.text)].join(" ? ");
        if (SQL_TEXT.test(text)) report(node, text);
      } else if (ts.isCallExpression(node)) {
        const callee = node.expression;
        const name = ts.isIdentifier(callee) ? callee.text : ts.isPropertyAccessExpression(callee) ? callee.name.text : "";
        const literal = node.arguments.find(
          (a) => ts.isStringLiteral(a) || ts.isNoSubstitutionTemplateLiteral(a) || ts.isTemplateExpression(a),
        );
        const sqlCall =
          (ts.isIdentifier(callee) && name === "statement") || (ts.isPropertyAccessExpression(callee) && SQL_METHODS.has(name));
        // A literal that reads as SQL is reported once, as the literal; this catches the rest (`exec("BEGIN")`).
        if (sqlCall && literal && !SQL_TEXT.test(literal.getText(source))) report(node, node.getText(source));
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return sites;
}

/** What each layer folder of a service may import: other layer folders, and (for the pure core) packages. */
export interface LayerRules {
  layers: Record<string, { imports: readonly string[] | "any"; packages?: readonly string[] }>;
}

/** Imports that go against `rules`, as `from → specifier (why)` lines (empty when the arrows all point down). */
export function layerViolations(root: string, rules: LayerRules): string[] {
  const out: string[] = [];
  for (const edge of importEdges(root)) {
    const layer = layerOf(edge.from);
    const rule = rules.layers[layer];
    if (!rule) {
      out.push(`${edge.from}: not in a layer folder (${LAYER_FOLDERS.join(", ")}) with a rule`);
      continue;
    }
    if (edge.target === undefined) {
      const packageName = edge.specifier;
      if (rule.packages && !rule.packages.includes(packageName))
        out.push(`${edge.from} → ${packageName} (${layer} may use only ${rule.packages.join(", ")})`);
      continue;
    }
    if (edge.target.startsWith("../")) {
      out.push(`${edge.from} → ${edge.specifier} (outside the service's src/)`);
      continue;
    }
    const to = layerOf(edge.target);
    if (rule.imports !== "any" && to !== layer && !rule.imports.includes(to)) {
      out.push(`${edge.from} → ${edge.specifier} (${layer} may import only ${[layer, ...rule.imports].join(", ")})`);
    }
  }
  return out;
}
