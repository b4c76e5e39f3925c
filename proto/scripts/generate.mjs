#!/usr/bin/env node
// Regenerates proto/src/gen from the .proto files with the npm `protoc` binary and ts-proto.
// `--check` regenerates into a temporary folder and exits 1 when the committed code is stale.
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const protoDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const root = join(protoDir, "..");
const require = createRequire(import.meta.url);
const protocBin = join(dirname(require.resolve("protoc/package.json")), "protoc.cjs");
const plugin = join(root, "node_modules", ".bin", "protoc-gen-ts_proto");

export const TS_PROTO_OPTIONS = [
  "outputServices=grpc-js",
  "esModuleInterop=true",
  "env=node",
  "importSuffix=.js",
  "snakeToCamel=false",
  "forceLong=number",
  "oneof=unions-value",
  "outputJsonMethods=false",
  "useDate=false",
].join(",");

function protoFiles(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (name === "node_modules" || name === "src" || name === "dist" || name === "scripts") continue;
    if (statSync(path).isDirectory()) out.push(...protoFiles(path));
    else if (name.endsWith(".proto")) out.push(relative(protoDir, path));
  }
  return out.sort();
}

function generate(outDir) {
  mkdirSync(outDir, { recursive: true });
  execFileSync(
    process.execPath,
    [
      protocBin,
      `--plugin=protoc-gen-ts_proto=${plugin}`,
      `--ts_proto_out=${outDir}`,
      `--ts_proto_opt=${TS_PROTO_OPTIONS}`,
      "-I",
      protoDir,
      ...protoFiles(protoDir),
    ],
    { stdio: "inherit" },
  );
  wrapSerializedBytes(outDir);
}

/**
 * ts-proto serializes a gRPC message as `Buffer.from(T.encode(value).finish())`, which copies the
 * bytes once more (Buffer.from of a Uint8Array copies). `finish()` returns a fresh array nobody else
 * holds, so the generated code wraps it instead: no copy of every message on every call (a
 * replication page is hundreds of KB).
 */
function wrapSerializedBytes(dir) {
  for (const file of listFiles(dir)) {
    if (!file.endsWith(".ts")) continue;
    const path = join(dir, file);
    const text = readFileSync(path, "utf8");
    const wrapped = text.replace(/Buffer\.from\((\w+)\.encode\(value\)\.finish\(\)\)/g, "asBuffer($1.encode(value).finish())");
    if (wrapped === text) continue;
    const helper =
      "\n/** The encoded bytes as a Buffer over the same memory (they are fresh: nothing else holds them). */\n" +
      "function asBuffer(bytes: Uint8Array): Buffer {\n  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);\n}\n";
    const at = wrapped.indexOf("\nexport const protobufPackage");
    writeFileSync(path, `${wrapped.slice(0, at)}${helper}${wrapped.slice(at)}`);
  }
}

function listFiles(dir, base = dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...listFiles(path, base));
    else out.push(relative(base, path));
  }
  return out.sort();
}

const genDir = join(protoDir, "src", "gen");
if (process.argv.includes("--check")) {
  const tmp = mkdtempSync(join(tmpdir(), "hermes-proto-"));
  try {
    generate(tmp);
    const fresh = listFiles(tmp);
    const committed = listFiles(genDir);
    const stale = [...new Set([...fresh, ...committed])].filter(
      (f) => !fresh.includes(f) || !committed.includes(f) || readFileSync(join(tmp, f), "utf8") !== readFileSync(join(genDir, f), "utf8"),
    );
    if (stale.length > 0) {
      console.error(`generated code is stale: ${stale.join(", ")}\nrun: npm run proto`);
      process.exit(1);
    }
    console.log(`generated code is current (${fresh.length} files)`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
} else {
  const tmp = mkdtempSync(join(tmpdir(), "hermes-proto-"));
  generate(tmp);
  rmSync(genDir, { recursive: true, force: true });
  cpSync(tmp, genDir, { recursive: true });
  rmSync(tmp, { recursive: true, force: true });
  console.log(`generated ${listFiles(genDir).length} files into ${relative(root, genDir)}`);
}
