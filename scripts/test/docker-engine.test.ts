import { execFile } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

/**
 * scripts/ensure-docker.sh and scripts/test.sh with a stand-in engine: fake `docker` and `dockerd`
 * (and `npm`/`npx` for test.sh) first on PATH; `docker info` answers while the fake dockerd runs.
 * Each case runs in its own PID namespace (`unshare`, root only), so `pgrep dockerd` sees only the
 * fake one: no real engine on this machine is looked at, started or stopped.
 */

const SCRIPTS = fileURLToPath(new URL("..", import.meta.url));
/** The scripts only start engines as root on Debian/Ubuntu; elsewhere there is nothing to check here. */
const debianRoot =
  process.platform === "linux" &&
  process.getuid?.() === 0 &&
  existsSync("/etc/os-release") &&
  /^(ID|ID_LIKE)=.*(debian|ubuntu)/im.test(readFileSync("/etc/os-release", "utf8"));

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

interface Sandbox {
  dir: string;
  bin: string;
  /** The fake engine's files: `up` (its pid) while it runs, `starts` (one line per start), `calls`. */
  state: string;
}

function sandbox(): Sandbox {
  const dir = mkdtempSync(join(tmpdir(), "docker-engine-"));
  dirs.push(dir);
  const bin = join(dir, "bin");
  const state = join(dir, "engine");
  mkdirSync(bin);
  mkdirSync(state);
  const fakes: Record<string, string> = {
    docker: `#!/bin/sh\ncase "$1" in info) [ -f "${state}/up" ] ;; version) echo fake ;; *) exit 2 ;; esac\n`,
    dockerd: `#!/bin/bash\necho $$ >"${state}/up"; echo started >>"${state}/starts"\ntrap 'rm -f "${state}/up"; exit 0' TERM\nwhile :; do sleep 0.05; done\n`,
    npm: `#!/bin/sh\necho "npm $*" >>"${state}/calls"\n`,
    // vitest "fails" (exit 7) unless the engine is up while it runs.
    npx: `#!/bin/sh\necho "npx $*" >>"${state}/calls"\nif [ "$1" = vitest ]; then [ -f "${state}/up" ] || exit 7; exit 3; fi\n`,
  };
  for (const [name, text] of Object.entries(fakes)) {
    writeFileSync(join(bin, name), text);
    chmodSync(join(bin, name), 0o755);
  }
  return { dir, bin, state };
}

/** Runs a bash snippet in a fresh PID namespace with the sandbox first on PATH. */
function inNamespace(box: Sandbox, script: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = {
    PATH: `${box.bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
    HERMES_DOCKERD_RUN_DIR: join(box.dir, "run"),
    HERMES_DOCKER_WAIT_S: "20",
    SCRIPTS,
    STATE: box.state,
  };
  return new Promise((resolve) => {
    execFile("unshare", ["--pid", "--fork", "--mount-proc", "bash", "-c", script], { env, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const read = (path: string) => (existsSync(path) ? readFileSync(path, "utf8") : "");

describe.skipIf(!debianRoot)("the Docker engine of the test script", () => {
  it("ensure-docker.sh --plan says what it would do and changes nothing; --started-file records the engine it starts; --stop stops it", async () => {
    const box = sandbox();
    const r = await inNamespace(
      box,
      `set -e
      echo "plan: $(bash "$SCRIPTS/ensure-docker.sh" --plan)"
      [ ! -f "$STATE/starts" ] || { echo "the plan started an engine" >&2; exit 9; }
      bash "$SCRIPTS/ensure-docker.sh" --started-file "$STATE/ours"
      echo "recorded: $(cat "$STATE/ours")"
      echo "running: $(cat "$STATE/up")"
      echo "plan: $(bash "$SCRIPTS/ensure-docker.sh" --plan)"
      bash "$SCRIPTS/ensure-docker.sh" --stop "$STATE/ours"
      if [ -f "$STATE/up" ]; then echo "after stop: running"; else echo "after stop: gone"; fi`,
    );
    expect(r.stderr).not.toContain("ERROR");
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines[0]).toBe("plan: no Docker engine answers: will start dockerd in the background");
    const recorded = /^recorded: (\d+)$/.exec(lines[1]!)?.[1];
    expect(recorded).toBeDefined();
    expect(lines[2]).toBe(`running: ${recorded}`);
    expect(lines[3]).toBe("plan: a Docker engine answers; nothing to install or start");
    expect(lines[4]).toBe("after stop: gone");
    expect(read(join(box.state, "starts")).trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toContain(`stopping the dockerd this run started (pid ${recorded})`);
  });

  it("a pid file left by an engine that is gone (its pid now another process's) starts a new engine instead of waiting", async () => {
    const box = sandbox();
    const r = await inNamespace(
      box,
      `set -e
      mkdir -p "$HERMES_DOCKERD_RUN_DIR"
      sleep 600 & echo $! >"$HERMES_DOCKERD_RUN_DIR/dockerd.pid"
      echo "plan: $(bash "$SCRIPTS/ensure-docker.sh" --plan)"
      bash "$SCRIPTS/ensure-docker.sh" --started-file "$STATE/ours"
      echo "running: $(cat "$STATE/up")"
      bash "$SCRIPTS/ensure-docker.sh" --stop "$STATE/ours"`,
    );
    expect(r.stderr).not.toContain("ERROR");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("plan: no Docker engine answers: will start dockerd in the background");
    expect(r.stdout).toMatch(/running: \d+/);
    expect(read(join(box.state, "starts")).trim().split("\n")).toHaveLength(1);
  });

  it("an engine it did not start is never stopped", async () => {
    const box = sandbox();
    const r = await inNamespace(
      box,
      `set -e
      setsid dockerd </dev/null >/dev/null 2>&1 &
      for _ in $(seq 200); do [ -f "$STATE/up" ] && break; sleep 0.05; done
      bash "$SCRIPTS/ensure-docker.sh" --started-file "$STATE/ours"
      echo "recorded: [$(cat "$STATE/ours")]"
      bash "$SCRIPTS/ensure-docker.sh" --stop "$STATE/ours"
      if [ -f "$STATE/up" ]; then echo "after stop: running"; else echo "after stop: gone"; fi`,
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("recorded: []");
    expect(r.stdout).toContain("after stop: running");
  });

  it("npm test says first that it will start an engine, runs the tests with it, stops it at the end and keeps vitest's exit code", async () => {
    const box = sandbox();
    const r = await inNamespace(
      box,
      `bash "$SCRIPTS/test.sh" --project core; echo "exit: $?"; [ -f "$STATE/up" ] && echo "engine: running" || echo "engine: gone"`,
    );
    const lines = r.stdout.trim().split("\n");
    expect(lines[0]).toBe(
      "test: container tests need Docker: no Docker engine answers: will start dockerd in the background (an engine started here is stopped when the tests end)",
    );
    expect(lines[1]).toBe("test: building (tsc -b)");
    // The fake vitest exits 3 when the engine is up during the run (7 when it is not).
    expect(lines.at(-2)).toBe("exit: 3");
    expect(lines.at(-1)).toBe("engine: gone");
    expect(read(join(box.state, "calls"))).toContain("npx vitest run --project core");
    expect(r.stderr).toMatch(/stopping the dockerd this run started \(pid \d+\)/);
  });
});
