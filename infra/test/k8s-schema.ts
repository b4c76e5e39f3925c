// Offline validation of Kubernetes manifests against the Kubernetes API types, with no cluster
// and no network: the types come from the npm package `kubernetes-types` (TypeScript
// declarations generated from the Kubernetes OpenAPI spec, one interface per API type, zero
// dependencies). Each manifest becomes a typed object literal in a virtual TypeScript module and
// the TypeScript compiler checks it:
//   - unknown field        -> excess property error ("'readinesProbe' does not exist in type 'Container'")
//   - wrong type           -> assignability error (replicas: "3")
//   - missing required     -> missing property error (a container without `name`)
//   - wrong apiVersion/kind pair -> literal type mismatch
// Errors are mapped back to file, document and a JSON path.

import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import ts from "typescript";

export interface ManifestDoc {
  file: string;
  /** Index of the document in its file (0-based). */
  index: number;
  obj: Record<string, unknown>;
}

export interface SchemaFinding {
  file: string;
  index: number;
  kind: string;
  name: string;
  path: string;
  message: string;
}

/** Directory of the installed kubernetes-types package (KUBERNETES_TYPES_DIR overrides). */
export function kubernetesTypesDir(): string {
  const fromEnv = process.env.KUBERNETES_TYPES_DIR;
  if (fromEnv) {
    if (!existsSync(join(fromEnv, "package.json"))) throw new Error(`KUBERNETES_TYPES_DIR=${fromEnv} has no package.json`);
    return fromEnv;
  }
  try {
    return dirname(createRequire(import.meta.url).resolve("kubernetes-types/package.json"));
  } catch {
    throw new Error("the devDependency kubernetes-types is not installed: npm install --save-dev --save-exact kubernetes-types@1.30.0");
  }
}

/** apiVersion -> the kubernetes-types module path ("apps/v1", "core/v1", "networking/v1", ...). */
export function typesModuleFor(apiVersion: string): string {
  const slash = apiVersion.indexOf("/");
  if (slash < 0) return `core/${apiVersion}`; // the core group has no group prefix
  const group = apiVersion
    .slice(0, slash)
    .replace(/\.k8s\.io$/, "")
    .split(".")[0];
  return `${group}/${apiVersion.slice(slash + 1)}`;
}

const IDENT = /^[A-Z][A-Za-z0-9]*$/;

export function validateManifests(docs: ManifestDoc[]): SchemaFinding[] {
  const typesDir = kubernetesTypesDir();
  const findings: SchemaFinding[] = [];
  const checked: Array<{ doc: ManifestDoc; variable: string }> = [];
  const lines: string[] = [];

  docs.forEach((doc, i) => {
    const apiVersion = doc.obj.apiVersion;
    const kind = doc.obj.kind;
    const base = { file: doc.file, index: doc.index, kind: String(kind), name: metadataName(doc.obj), path: "" };
    if (typeof apiVersion !== "string" || typeof kind !== "string" || !IDENT.test(kind)) {
      findings.push({ ...base, message: "apiVersion and kind must be strings (kind in CamelCase)" });
      return;
    }
    const module = join(typesDir, typesModuleFor(apiVersion));
    if (!existsSync(`${module}.d.ts`)) {
      findings.push({ ...base, message: `no Kubernetes API types for apiVersion ${apiVersion}` });
      return;
    }
    const variable = `m${i}`;
    checked.push({ doc, variable });
    lines.push(`export const ${variable}: import(${JSON.stringify(module)}).${kind} = ${JSON.stringify(doc.obj, null, 1)};`);
  });

  const fileName = join(process.cwd(), "__k8s_manifests__.ts");
  const source = lines.join("\n");
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    types: [],
    skipLibCheck: true,
  };
  const host = ts.createCompilerHost(options);
  const readFile = host.readFile.bind(host);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (f) => f === fileName || fileExists(f);
  host.readFile = (f) => (f === fileName ? source : readFile(f));
  host.getSourceFile = (f, lang, ...rest) =>
    f === fileName ? ts.createSourceFile(f, source, lang, true) : getSourceFile(f, lang, ...rest);
  const program = ts.createProgram([fileName], options, host);
  const sf = program.getSourceFile(fileName);
  if (!sf) throw new Error("virtual manifest module missing from the program");

  for (const d of ts.getPreEmitDiagnostics(program)) {
    const message = ts.flattenDiagnosticMessageText(d.messageText, " ");
    if (!d.file || d.file.fileName !== fileName || d.start === undefined) {
      findings.push({ file: "(types)", index: 0, kind: "", name: "", path: "", message });
      continue;
    }
    const node = findNode(sf, d.start);
    const { variable, path } = jsonPathOf(node);
    const hit = checked.find((c) => c.variable === variable);
    findings.push({
      file: hit?.doc.file ?? "(unknown)",
      index: hit?.doc.index ?? -1,
      kind: String(hit?.doc.obj.kind ?? ""),
      name: hit ? metadataName(hit.doc.obj) : "",
      path,
      message,
    });
  }
  return findings;
}

export function formatFinding(f: SchemaFinding): string {
  return `${f.file}#${f.index} ${f.kind}/${f.name}${f.path ? ` ${f.path}` : ""}: ${f.message}`;
}

function metadataName(obj: Record<string, unknown>): string {
  const meta = obj.metadata as { name?: unknown } | undefined;
  return typeof meta?.name === "string" ? meta.name : "(no name)";
}

function findNode(sf: ts.SourceFile, pos: number): ts.Node {
  let found: ts.Node = sf;
  const visit = (n: ts.Node) => {
    if (pos >= n.getStart(sf) && pos < n.getEnd()) {
      found = n;
      n.forEachChild(visit);
    }
  };
  sf.forEachChild(visit);
  return found;
}

/** From the node an error points at up to `export const mN`, collecting property names and indices. */
function jsonPathOf(node: ts.Node): { variable: string; path: string } {
  const parts: string[] = [];
  let n: ts.Node | undefined = node;
  let child: ts.Node | undefined;
  let variable = "";
  while (n) {
    if (ts.isPropertyAssignment(n)) {
      const name = ts.isStringLiteral(n.name) || ts.isIdentifier(n.name) ? n.name.text : n.name.getText();
      parts.unshift(name);
    } else if (ts.isArrayLiteralExpression(n) && child) {
      parts.unshift(`[${n.elements.indexOf(child as ts.Expression)}]`);
    } else if (ts.isVariableDeclaration(n) && ts.isIdentifier(n.name)) {
      variable = n.name.text;
      break;
    }
    child = n;
    n = n.parent;
  }
  return { variable, path: parts.join(".").replace(/\.\[/g, "[") };
}
