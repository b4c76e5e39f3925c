// Poor man's Ryuk. Testcontainers' reaper is disabled (TESTCONTAINERS_RYUK_DISABLED=true: it
// would need a pulled image), so a run killed half-way leaves containers, networks and volumes
// behind, and leaked networks eventually exhaust Docker's address pools. Every resource the
// harness creates carries an owner label (host/pid/start-time of the vitest main process):
//   - before a run we remove what belongs to owners that no longer exist (a concurrent run of
//     another engineer on the same engine is left alone);
//   - after a run we remove what this run owns.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { LABEL } from "./run-context.js";

export interface SweepResult {
  containers: number;
  networks: number;
  volumes: number;
}

/** Identity of a live process that survives pid reuse: host/pid/start-time. */
export function processOwner(pid = process.pid): string {
  return `${hostname()}/${pid}/${processStartTime(pid) ?? "?"}`;
}

function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after "(comm)"; starttime is field 22 overall, so index 19 here.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

export function ownerIsAlive(owner: string): boolean {
  const [host, pidText, start] = owner.split("/");
  if (host !== hostname()) return true; // another machine's run on a shared engine: not ours to judge
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const actual = processStartTime(pid);
  return actual === undefined || start === "?" || actual === start;
}

function docker(args: string[]): string {
  return execFileSync("docker", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

function listLabelled(kind: "container" | "network" | "volume"): Array<{ id: string; owner: string }> {
  const idField = kind === "volume" ? "{{.Name}}" : "{{.ID}}";
  const format = `${idField}\t{{.Label "${LABEL.owner}"}}`;
  const args =
    kind === "container"
      ? ["ps", "-a", "--filter", `label=${LABEL.marker}`, "--format", format]
      : [kind, "ls", "--filter", `label=${LABEL.marker}`, "--format", format];
  return docker(args)
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => {
      const [id = "", owner = ""] = line.split("\t");
      return { id, owner };
    });
}

/**
 * Remove labelled resources whose owner matches `select`. Containers first (they hold
 * network endpoints and volumes), then networks and volumes. Failures are reported, not thrown:
 * a sweep must never hide the test result.
 */
export function sweep(select: (owner: string) => boolean): SweepResult {
  const result: SweepResult = { containers: 0, networks: 0, volumes: 0 };
  const remove = (kind: keyof SweepResult, args: string[], ids: string[]) => {
    if (ids.length === 0) return;
    try {
      docker([...args, ...ids]);
      result[kind] += ids.length;
    } catch (err) {
      // Remove one by one so a single stuck resource does not keep the others.
      for (const id of ids) {
        try {
          docker([...args, id]);
          result[kind]++;
        } catch {
          process.stderr.write(`[sweep] could not remove ${kind.slice(0, -1)} ${id}: ${(err as Error).message.split("\n")[0]}\n`);
        }
      }
    }
  };
  const pick = (kind: "container" | "network" | "volume") =>
    listLabelled(kind)
      .filter((r) => select(r.owner))
      .map((r) => r.id);
  remove("containers", ["rm", "-f", "-v"], pick("container"));
  remove("networks", ["network", "rm"], pick("network"));
  remove("volumes", ["volume", "rm", "-f"], pick("volume"));
  return result;
}

export const describeSweep = (r: SweepResult) => `${r.containers} containers, ${r.networks} networks, ${r.volumes} volumes`;
