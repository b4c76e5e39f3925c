#!/usr/bin/env node
// Build the offline images with fixed tags, without any registry:
//   1. hermes-mesh/base:hostfs  (infra/image/build-base-hostfs.sh: host node + libs + busybox + ip/nft/iptables)
//   2. hermes-mesh/app:local    (infra/image/Dockerfile.offline FROM the base, with the staged project)
//
//   node infra/image/build-images.mjs [--force] [--json]
//
// Fast when cached: each image carries a label with the hash of its inputs and is reused when
// the hash matches (about 1-2 s for the whole script, most of it staging and hashing).
// Run `npm run build` first: the image gets what is in the dist/ folders, and the script warns
// when sources are newer than the build.
// Environment: HERMES_BASE_IMAGE, HERMES_APP_IMAGE (tags), HERMES_DOCKER_BUILDKIT=1 (use BuildKit;
// needs the buildx plugin with the 23+ CLI).
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { newestMtime, REPO, stageApp } from "./stage-app.mjs";

export const BASE_IMAGE = process.env.HERMES_BASE_IMAGE ?? "hermes-mesh/base:hostfs";
export const APP_IMAGE = process.env.HERMES_APP_IMAGE ?? "hermes-mesh/app:local";
const APP_LABEL = "org.hermes-mesh.app.inputs";

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
  for (const ws of ["proto", "services/common", "services/gateway", "services/relay", "services/cli"]) {
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
  let built = false;
  if (!force && imageLabel(APP_IMAGE, APP_LABEL) === key) {
    say(`${APP_IMAGE} is up to date (inputs ${key})`);
  } else {
    const previous = run("docker", ["image", "inspect", "--format", "{{.Id}}", APP_IMAGE]).stdout.trim();
    say(`building ${APP_IMAGE} from ${BASE_IMAGE} (${stage.packages} runtime packages)`);
    // Legacy builder by default: it uses the local base image as is and needs no buildx plugin
    // (the 28.x CLI on Debian's dockerd has none, and DOCKER_BUILDKIT=1 then fails).
    const buildkit = process.env.HERMES_DOCKER_BUILDKIT === "1" ? "1" : "0";
    const res = run(
      "docker",
      ["build", "--quiet", "--tag", APP_IMAGE, "--label", `${APP_LABEL}=${key}`, "--build-arg", `BASE=${BASE_IMAGE}`, stage.out],
      { env: { ...process.env, DOCKER_BUILDKIT: buildkit } },
    );
    if (res.status !== 0) {
      process.stderr.write(res.stderr);
      throw new Error(`docker build of ${APP_IMAGE} failed (exit ${res.status})`);
    }
    built = true;
    // The replaced image is now untagged; drop it unless a container still uses it.
    if (previous) run("docker", ["image", "rm", previous]);
    say(`built ${APP_IMAGE} (inputs ${key})`);
  }
  timings.appMs = Date.now() - t;

  return { baseImage: BASE_IMAGE, appImage: APP_IMAGE, appBuilt: built, cliEntry: stage.cliEntry, problems: stage.problems, timings };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2);
  try {
    const result = buildImages({ force: args.includes("--force") });
    if (args.includes("--json")) console.log(JSON.stringify(result));
    else say(`done: base ${result.timings.baseMs} ms, stage ${result.timings.stageMs} ms, app ${result.timings.appMs} ms`);
  } catch (err) {
    say(`ERROR: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  }
}
