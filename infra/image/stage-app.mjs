#!/usr/bin/env node
// Stage the built project into a directory that becomes /app in the image:
//   - the root package.json (trimmed to what running needs),
//   - every workspace's package.json + its published files (`files`, else dist/) + bin/,
//   - the runtime dependency closure of the root and workspace "dependencies", copied from the
//     installed node_modules with npm's hoisting layout kept, so node resolves exactly what the
//     host resolves. No devDependencies, no TypeScript sources, no tests, no secrets.
// Native addons (packages with binding.gyp) keep only their compiled build/Release/*.node: the
// host's node runs in the hostfs base image, so the host-built binary loads unchanged.
//
//   node infra/image/stage-app.mjs [--out DIR] [--json]
//
// The stage key is a hash of every staged path, mode, size and mtime (and of the generated
// package.json files). An unchanged key leaves the stage on disk as it is, and build-images.mjs
// reuses the image built from it.
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const REPO = resolve(here, "../..");

// Dependencies that only run at install time (they fetch or compile the addon); never at run time.
const INSTALL_TIME_ONLY = new Set(["prebuild-install", "node-gyp"]);
// Never staged, wherever they appear (build leftovers, tests, editor and VCS files, secrets).
const EXCLUDED_NAME = /(^\.git$|^\.github$|\.tsbuildinfo$|\.test\.(js|d\.ts|js\.map|d\.ts\.map)$|^\.env$|^\.env\.)/;

const readJson = (file) => JSON.parse(readFileSync(file, "utf8"));

function workspaceDirs(rootPkg) {
  const dirs = [];
  for (const pattern of rootPkg.workspaces ?? []) {
    if (pattern.endsWith("/*")) {
      const base = join(REPO, pattern.slice(0, -2));
      for (const entry of readdirSync(base)) if (existsSync(join(base, entry, "package.json"))) dirs.push(join(base, entry));
    } else if (existsSync(join(REPO, pattern, "package.json"))) dirs.push(join(REPO, pattern));
  }
  return dirs;
}

/** Node's lookup: <dir>/node_modules/<name>, then the parents, up to the repository root. */
function findInstalled(name, fromDir) {
  let dir = fromDir;
  for (;;) {
    const candidate = join(dir, "node_modules", name);
    if (existsSync(join(candidate, "package.json"))) return candidate;
    if (dir === REPO || !dir.startsWith(REPO)) return undefined;
    dir = dirname(dir);
  }
}

/**
 * What goes into the stage, decided before anything is copied: regular files (by source
 * path), generated files (by content) and symlinks.
 */
class StagePlan {
  /** @type {Map<string, { src?: string, content?: string, link?: string }>} */
  entries = new Map();

  file(rel, src) {
    this.entries.set(rel, { src });
  }

  content(rel, content) {
    this.entries.set(rel, { content });
  }

  link(rel, target) {
    this.entries.set(rel, { link: target });
  }

  /** Every file under `from` (recursively) that passes the filters, staged under `rel`. */
  tree(from, rel, keep = () => true) {
    for (const entry of readdirSync(from, { withFileTypes: true })) {
      if (EXCLUDED_NAME.test(entry.name)) continue;
      const src = join(from, entry.name);
      if (!keep(src)) continue;
      const dst = join(rel, entry.name);
      if (entry.isSymbolicLink()) this.link(dst, readlinkSync(src));
      else if (entry.isDirectory()) this.tree(src, dst, keep);
      else if (entry.isFile()) this.file(dst, src);
    }
  }

  key() {
    const hash = createHash("sha256");
    for (const rel of [...this.entries.keys()].sort()) {
      const e = this.entries.get(rel);
      if (e.link !== undefined) hash.update(`L ${rel} ${e.link}\n`);
      else if (e.content !== undefined) hash.update(`C ${rel} ${createHash("sha256").update(e.content).digest("hex")}\n`);
      else {
        const st = statSync(e.src);
        hash.update(`F ${rel} ${st.mode} ${st.size} ${st.mtimeMs}\n`);
      }
    }
    return hash.digest("hex").slice(0, 32);
  }

  materialize(root) {
    rmSync(root, { recursive: true, force: true });
    for (const [rel, e] of this.entries) {
      const dst = join(root, rel);
      mkdirSync(dirname(dst), { recursive: true });
      if (e.link !== undefined) symlinkSync(e.link, dst);
      else if (e.content !== undefined) writeFileSync(dst, e.content);
      else copyFileSync(e.src, dst); // keeps the mode: executables stay executable
    }
  }
}

function stageWorkspace(plan, wsDir, problems) {
  const pkg = readJson(join(wsDir, "package.json"));
  const rel = relative(REPO, wsDir);
  const trimmed = { ...pkg };
  delete trimmed.devDependencies;
  delete trimmed.scripts;
  plan.content(join(rel, "package.json"), `${JSON.stringify(trimmed, null, 2)}\n`);
  const entries = new Set([...(pkg.files ?? ["dist"]), "bin"]);
  let staged = 0;
  for (const entry of entries) {
    const from = join(wsDir, entry);
    if (!existsSync(from)) continue;
    if (statSync(from).isDirectory()) plan.tree(from, join(rel, entry));
    else plan.file(join(rel, entry), from);
    staged++;
  }
  if (staged === 0) problems.push(`${rel}: nothing built (no ${[...entries].join(", ")}); run \`npm run build\``);
  return pkg;
}

function stagePackage(plan, pkgDir) {
  const rel = relative(REPO, pkgDir);
  const isNative = existsSync(join(pkgDir, "binding.gyp"));
  const topNodeModules = join(pkgDir, "node_modules");
  plan.tree(pkgDir, rel, (src) => {
    if (src === topNodeModules) return false; // nested deps are staged on their own, when needed
    if (!isNative) return true;
    const inner = relative(pkgDir, src).split(sep);
    if (inner[0] === "deps" || inner[0] === "src") return false; // C/C++ sources of the addon
    if (inner[0] === "build") return inner.length === 1 || (inner[1] === "Release" && (inner.length === 2 || src.endsWith(".node")));
    return true;
  });
}

/**
 * @param {{ out?: string }} [options]
 * @returns {{ out: string, hash: string, packages: number, files: number, reused: boolean, cliEntry: boolean, problems: string[] }}
 */
export function stageApp(options = {}) {
  const out = resolve(options.out ?? join(REPO, "infra/build/app-stage"));
  const outApp = join(out, "app");
  const stamp = join(out, ".stage-key");
  const problems = [];
  const plan = new StagePlan();

  const rootPkg = readJson(join(REPO, "package.json"));
  const wsByName = new Map();
  for (const dir of workspaceDirs(rootPkg)) wsByName.set(readJson(join(dir, "package.json")).name, dir);

  const rootTrimmed = {
    name: rootPkg.name,
    version: rootPkg.version,
    private: true,
    type: rootPkg.type,
    bin: rootPkg.bin,
    workspaces: rootPkg.workspaces,
    dependencies: rootPkg.dependencies,
  };
  plan.content("package.json", `${JSON.stringify(rootTrimmed, null, 2)}\n`);

  /** @type {Array<{ name: string, from: string, optional: boolean }>} */
  const queue = [];
  const enqueueDeps = (pkg, from) => {
    for (const name of Object.keys(pkg.dependencies ?? {})) queue.push({ name, from, optional: false });
    for (const name of Object.keys(pkg.optionalDependencies ?? {})) queue.push({ name, from, optional: true });
    for (const name of Object.keys(pkg.peerDependencies ?? {})) queue.push({ name, from, optional: true });
  };
  enqueueDeps(rootPkg, REPO);
  for (const [name, dir] of wsByName) {
    enqueueDeps(stageWorkspace(plan, dir, problems), dir);
    // Workspaces import each other by package name through these links; stage them all.
    queue.push({ name, from: REPO, optional: false });
  }

  const seen = new Set();
  let packages = 0;
  while (queue.length > 0) {
    const { name, from, optional } = queue.shift();
    if (INSTALL_TIME_ONLY.has(name) || name.startsWith("@types/")) continue; // type declarations never run
    const installed = findInstalled(name, from);
    if (!installed) {
      if (!optional) problems.push(`${name} (needed by ${relative(REPO, from) || "the root package"}) is not installed; run \`npm ci\``);
      continue;
    }
    const rel = relative(REPO, installed);
    if (seen.has(rel)) continue;
    seen.add(rel);
    if (lstatSync(installed).isSymbolicLink()) {
      // A workspace link (node_modules/@hermes/x -> ../../services/x): keep it a link.
      const target = readlinkSync(installed);
      plan.link(rel, target);
      if (!wsByName.has(name)) problems.push(`${rel} links to ${target}, which is not a workspace of this repository`);
      continue;
    }
    stagePackage(plan, installed);
    packages++;
    enqueueDeps(readJson(join(installed, "package.json")), installed);
  }

  const binRel = typeof rootPkg.bin === "string" ? rootPkg.bin : Object.values(rootPkg.bin ?? {})[0];
  const cliEntry = typeof binRel === "string" && plan.entries.has(binRel);
  if (!cliEntry) problems.push(`CLI entry ${binRel ?? "(no root bin)"} is missing; the image cannot run \`hermes\` until it is built`);

  const hash = plan.key();
  const current = existsSync(stamp) && existsSync(outApp) ? readFileSync(stamp, "utf8").trim() : "";
  const reused = current === hash;
  if (!reused) {
    plan.materialize(outApp);
    writeFileSync(stamp, `${hash}\n`);
  }
  return { out, hash, packages, files: plan.entries.size, reused, cliEntry, problems };
}

/** Newest mtime (ms) of the files under dir whose names match re; 0 when none. */
export function newestMtime(dir, re) {
  let newest = 0;
  if (!existsSync(dir)) return 0;
  const walk = (d) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      if (entry.name === "node_modules" || entry.name === "dist") continue;
      const full = join(d, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (re.test(entry.name)) newest = Math.max(newest, statSync(full).mtimeMs);
    }
  };
  walk(dir);
  return newest;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const outIdx = args.indexOf("--out");
  const result = stageApp(outIdx >= 0 ? { out: args[outIdx + 1] } : {});
  if (args.includes("--json")) console.log(JSON.stringify(result));
  else {
    for (const p of result.problems) console.error(`[stage-app] warning: ${p}`);
    console.error(
      `[stage-app] ${result.reused ? "kept" : "staged"} ${result.files} files of ${result.packages} packages in ${relative(process.cwd(), result.out) || "."} (key ${result.hash})`,
    );
  }
}
