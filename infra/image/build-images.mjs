#!/usr/bin/env node
// Build the offline images with fixed tags, without any registry:
//   1. hermes-mesh/base:hostfs  (infra/image/build-base-hostfs.sh: host node + libs + busybox + ip/nft/iptables)
//   2. hermes-mesh/app:local    (infra/image/Dockerfile.offline FROM the base, with the staged project)
//   3. hermes-mesh/etcd:local   (infra/image/Dockerfile.etcd FROM the base, with the etcd binary of Debian's
//                                etcd-server package as installed on the host; scripts/ensure-etcd.sh installs it)
//
//   node infra/image/build-images.mjs [--force] [--json]
//
// Fast when cached: each image carries a label with the hash of its inputs and is reused when
// the hash matches (about 1-2 s for the whole script, most of it staging and hashing).
// Run `npm run build` first: the image gets what is in the dist/ folders, and the script warns
// when sources are newer than the build.
// Environment: HERMES_BASE_IMAGE, HERMES_APP_IMAGE, HERMES_ETCD_IMAGE (tags), HERMES_DOCKER_BUILDKIT=1 (use BuildKit;
// needs the buildx plugin with the 23+ CLI).
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { newestMtime, REPO, stageApp } from "./stage-app.mjs";

export const BASE_IMAGE = process.env.HERMES_BASE_IMAGE ?? "hermes-mesh/base:hostfs";
export const APP_IMAGE = process.env.HERMES_APP_IMAGE ?? "hermes-mesh/app:local";
export const ETCD_IMAGE = process.env.HERMES_ETCD_IMAGE ?? "hermes-mesh/etcd:local";
const APP_LABEL = "org.hermes-mesh.app.inputs";
const ETCD_LABEL = "org.hermes-mesh.etcd.inputs";

const say = (msg) => console.error(`[build-images] ${msg}`);

function run(cmd, args, options = {}) {
  const res = spawnSync(cmd, args, { stdio: ["ignore", "pipe", "pipe"], encoding: "utf8", ...options });
  if (res.error) throw new Error(`${cmd} could not start: ${res.error.message}`);
  return res;
}

function mustRun(cmd, args, options = {}) {
  const res = run(cmd, args, { ...options, stdio: ["ignore", "pipe", "inherit"] });
  if (res.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed with exit code ${res.status}`);
  return res.stdout;
}

function imageLabel(tag, label) {
  const res = run("docker", ["image", "inspect", "--format", `{{ index .Config.Labels "${label}" }}`, tag]);
  return res.status === 0 ? res.stdout.trim() : undefined;
}

function imageId(tag) {
  const res = run("docker", ["image", "inspect", "--format", "{{.Id}}", tag]);
  if (res.status !== 0) throw new Error(`image ${tag} not found after building it`);
  return res.stdout.trim();
}

/** Sources newer than their build output: the image would run stale code. */
function staleBuildWarnings() {
  const warnings = [];
  for (const ws of ["proto", "services/contract", "services/common", "services/gateway", "services/relay", "services/cli"]) {
    const src = newestMtime(join(REPO, ws, "src"), /\.ts$/);
    const dist = newestMtime(join(REPO, ws, "dist"), /\.js$/);
    if (src > 0 && dist > 0 && src > dist) warnings.push(`${ws}: sources are newer than dist/; run \`npm run build\``);
  }
  return warnings;
}

/**
 * @param {{ force?: boolean }} [options]
 */
export function buildImages(options = {}) {
  const force = options.force ?? false;
  const timings = {};

  let t = Date.now();
  mustRun("bash", [join(REPO, "scripts/ensure-docker.sh")]);
  timings.ensureDockerMs = Date.now() - t;

  t = Date.now();
  mustRun("bash", [join(REPO, "infra/image/build-base-hostfs.sh"), ...(force ? ["--force"] : [])], {
    env: { ...process.env, HERMES_BASE_IMAGE: BASE_IMAGE },
  });
  timings.baseMs = Date.now() - t;

  t = Date.now();
  for (const w of staleBuildWarnings()) say(`warning: ${w}`);
  const stage = stageApp();
  for (const p of stage.problems) say(`warning: ${p}`);
  copyFileSync(join(REPO, "infra/image/Dockerfile.offline"), join(stage.out, "Dockerfile"));
  copyFileSync(join(REPO, "infra/image/hermes.sh"), join(stage.out, "hermes.sh"));
  const key = createHash("sha256")
    .update(stage.hash)
    .update(imageId(BASE_IMAGE))
    .update(readFileSync(join(stage.out, "Dockerfile")))
    .update(readFileSync(join(stage.out, "hermes.sh")))
    .digest("hex")
    .slice(0, 32);
  timings.stageMs = Date.now() - t;

  t = Date.now();
  const built = buildTagged({
    tag: APP_IMAGE,
    label: APP_LABEL,
    key,
    context: stage.out,
    force,
    what: `${stage.packages} runtime packages`,
  });
  timings.appMs = Date.now() - t;

  t = Date.now();
  const etcd = buildEtcdImage(force);
  timings.etcdMs = Date.now() - t;

  return {
    baseImage: BASE_IMAGE,
    appImage: APP_IMAGE,
    appBuilt: built,
    etcdImage: ETCD_IMAGE,
    etcdBuilt: etcd.built,
    etcdVersion: etcd.version,
    cliEntry: stage.cliEntry,
    problems: stage.problems,
    timings,
  };
}

/**
 * `docker build` of a staged context into `tag`, labelled with the hash of its inputs; skipped when
 * the image already carries that hash. Returns whether it built.
 */
function buildTagged({ tag, label, key, context, force, what }) {
  if (!force && imageLabel(tag, label) === key) {
    say(`${tag} is up to date (inputs ${key})`);
    return false;
  }
  const previous = run("docker", ["image", "inspect", "--format", "{{.Id}}", tag]).stdout.trim();
  say(`building ${tag} from ${BASE_IMAGE} (${what})`);
  // Legacy builder by default: it uses the local base image as is and needs no buildx plugin
  // (the 28.x CLI on Debian's dockerd has none, and DOCKER_BUILDKIT=1 then fails).
  const buildkit = process.env.HERMES_DOCKER_BUILDKIT === "1" ? "1" : "0";
  const res = run(
    "docker",
    ["build", "--quiet", "--tag", tag, "--label", `${label}=${key}`, "--build-arg", `BASE=${BASE_IMAGE}`, context],
    {
      env: { ...process.env, DOCKER_BUILDKIT: buildkit },
    },
  );
  if (res.status !== 0) {
    process.stderr.write(res.stderr);
    throw new Error(`docker build of ${tag} failed (exit ${res.status})`);
  }
  // The replaced image is now untagged; drop it unless a container still uses it.
  if (previous) run("docker", ["image", "rm", previous]);
  say(`built ${tag} (inputs ${key})`);
  return true;
}

/** The host's etcd binary (scripts/ensure-etcd.sh puts Debian's there when it is missing), as a real path. */
function hostEtcdBinary() {
  mustRun("bash", [join(REPO, "scripts/ensure-etcd.sh")]);
  const found = run("sh", ["-c", "command -v etcd || { test -x /usr/bin/etcd && echo /usr/bin/etcd; }"]).stdout.trim();
  if (!found) throw new Error("no etcd binary after scripts/ensure-etcd.sh");
  return realpathSync(found);
}

/**
 * hermes-mesh/etcd:local: the base image plus the host's etcd (Debian's etcd-server). etcd is a Go
 * binary that needs only the C library, which the base already carries from the same host; the
 * fresh image is checked with `etcd --version` all the same.
 */
function buildEtcdImage(force) {
  const binary = hostEtcdBinary();
  const version = /etcd Version: (\S+)/.exec(mustRun(binary, ["--version"]))?.[1] ?? "unknown";
  const owner = run("sh", ["-c", 'dpkg -S "$1" 2>/dev/null', "dpkg-owner", binary]);
  if (owner.status !== 0 || !owner.stdout.startsWith("etcd-server:"))
    say(`warning: ${binary} does not come from Debian's etcd-server package; using it anyway (etcd ${version})`);
  const out = join(REPO, "infra/build/etcd-stage");
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  copyFileSync(binary, join(out, "etcd"));
  copyFileSync(join(REPO, "infra/image/Dockerfile.etcd"), join(out, "Dockerfile"));
  const key = createHash("sha256")
    .update(readFileSync(join(out, "etcd")))
    .update(imageId(BASE_IMAGE))
    .update(readFileSync(join(out, "Dockerfile")))
    .digest("hex")
    .slice(0, 32);
  const built = buildTagged({ tag: ETCD_IMAGE, label: ETCD_LABEL, key, context: out, force, what: `etcd ${version} from ${binary}` });
  if (built) {
    const check = run("docker", ["run", "--rm", "--network", "none", ETCD_IMAGE, "--version"]);
    if (check.status !== 0 || !check.stdout.includes(version))
      throw new Error(`${ETCD_IMAGE} does not run etcd --version: ${check.stderr || check.stdout}`);
  }
  return { built, version };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2);
  try {
    const result = buildImages({ force: args.includes("--force") });
    if (args.includes("--json")) console.log(JSON.stringify(result));
    else
      say(
        `done: base ${result.timings.baseMs} ms, stage ${result.timings.stageMs} ms, app ${result.timings.appMs} ms, etcd ${result.timings.etcdMs} ms`,
      );
  } catch (err) {
    say(`ERROR: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  }
}
