#!/usr/bin/env node
// Builds the console into dist/: a typecheck of web/ (DOM types, tsc --noEmit), then vite. The
// views take @hermes/contract (receipt states, …) from its sources, as the tests do, so a build never
// depends on a stale contract build. With --if-stale it does nothing when dist/index.html is newer
// than every file under web/ and the contract's sources (the test set-up calls it so, before any
// test file runs).
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const web = join(here, "web");
const dist = join(here, "dist");
const contract = join(here, "../contract/src");

function newest(dir) {
  let latest = 0;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const s = statSync(path);
    latest = Math.max(latest, s.isDirectory() ? newest(path) : s.mtimeMs);
  }
  return latest;
}

const index = join(dist, "index.html");
if (
  process.argv.includes("--if-stale") &&
  existsSync(index) &&
  statSync(index).mtimeMs >= Math.max(newest(web), newest(contract), statSync(fileURLToPath(import.meta.url)).mtimeMs)
) {
  process.exit(0);
}

const require = createRequire(import.meta.url);
execFileSync(process.execPath, [require.resolve("typescript/bin/tsc"), "-p", join(web, "tsconfig.json")], { stdio: "inherit" });

const { build } = await import("vite");
await build({
  root: web,
  base: "/",
  logLevel: "warn",
  configFile: false,
  publicDir: false,
  resolve: { alias: { "@hermes/contract": join(contract, "index.ts") } },
  build: {
    outDir: dist,
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
});
console.log(`console built into ${dist}`);
