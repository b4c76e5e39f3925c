// A seeded nemesis: a bounded run of random faults against a coordinated mesh (gateways and etcd
// members), one fault at a time, each held for a while and then healed, with quiet gaps between.
//
//   const plan = planNemesis({ seed, seconds, gateways: ["gw-a", "gw-b", "gw-c"], etcd: ["etcd-0", "etcd-1", "etcd-2"] });
//   console.log(describePlan(plan));              // the seed and every step, so a failure can be replayed
//   const applied = await runNemesis(mesh, plan, nodesByName);
//
// The plan is a pure function of (seed, seconds, names): HERMES_NEMESIS_SEED=<seed> replays the same
// faults in the same order with the same holds (the system's own timing still varies). One fault at a
// time keeps a 3-gateway, min_insync 2 room able to recover after every heal, so what the run checks
// is that nothing acknowledged is lost and no two gateways acknowledge in one epoch, not whether the
// mesh survives two simultaneous failures (it is not designed to).

import type { Mesh } from "./mesh.js";
import type { MeshNode } from "./node.js";

export type FaultKind =
  /** kill -9 of a gateway; restarted on its volume after the hold. */
  | "kill-gateway"
  /** SIGSTOP of a gateway for the hold, then SIGCONT. */
  | "pause-gateway"
  /** Two gateways cut from each other. */
  | "cut-gateways"
  /** A gateway cut from every etcd member. */
  | "cut-gateway-from-etcd"
  /** kill -9 of one etcd member (the others keep the quorum); restarted after the hold. */
  | "kill-etcd-member"
  /** SIGSTOP of one etcd member for the hold. */
  | "pause-etcd-member";

export interface NemesisStep {
  /** Offset of the fault from the start of the run (ms). */
  atMs: number;
  kind: FaultKind;
  /** Node names: one, or two for cut-gateways. */
  targets: string[];
  /** How long the fault lasts before it is healed (ms). */
  holdMs: number;
}

export interface NemesisPlan {
  seed: number;
  seconds: number;
  steps: NemesisStep[];
}

export interface NemesisOptions {
  seed: number;
  seconds: number;
  gateways: string[];
  etcd: string[];
  /** Fault hold, ms (default 1,500–6,000: around a few lease TTLs of 3 s). */
  holdMs?: [number, number];
  /** Quiet gap after each heal, ms (default 1,000–4,000). */
  gapMs?: [number, number];
}

const KINDS: FaultKind[] = [
  "kill-gateway",
  "pause-gateway",
  "cut-gateways",
  "cut-gateway-from-etcd",
  "kill-etcd-member",
  "pause-etcd-member",
];

/** mulberry32: a tiny seeded PRNG (uniform in [0, 1)). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The faults of one run: they start within `seconds`; each one's hold and the gap after it fit too. */
export function planNemesis(options: NemesisOptions): NemesisPlan {
  if (!Number.isInteger(options.seed) || options.seed < 0)
    throw new Error(`nemesis seed must be a non-negative integer, got ${options.seed}`);
  if (!(options.seconds > 0)) throw new Error(`nemesis seconds must be positive, got ${options.seconds}`);
  if (options.gateways.length < 2) throw new Error("the nemesis needs at least two gateways");
  const random = seededRandom(options.seed);
  const between = ([lo, hi]: [number, number]) => Math.round(lo + random() * (hi - lo));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
  const kinds = options.etcd.length >= 3 ? KINDS : KINDS.filter((k) => !k.endsWith("etcd-member"));
  const holdRange = options.holdMs ?? [1_500, 6_000];
  const gapRange = options.gapMs ?? [1_000, 4_000];
  const end = options.seconds * 1000;
  const steps: NemesisStep[] = [];
  let at = between(gapRange);
  for (;;) {
    const kind = pick(kinds);
    const holdMs = between(holdRange);
    const gap = between(gapRange);
    if (at + holdMs > end) break;
    let targets: string[];
    if (kind === "cut-gateways") {
      const first = pick(options.gateways);
      targets = [first, pick(options.gateways.filter((g) => g !== first))];
    } else if (kind.endsWith("etcd-member")) targets = [pick(options.etcd)];
    else targets = [pick(options.gateways)];
    steps.push({ atMs: at, kind, targets, holdMs });
    at += holdMs + gap;
  }
  return { seed: options.seed, seconds: options.seconds, steps };
}

/** The seed from HERMES_NEMESIS_SEED, else a fresh random one; the duration from HERMES_NEMESIS_SECONDS. */
export function nemesisSettings(env: NodeJS.ProcessEnv, defaultSeconds: number): { seed: number; seconds: number; replayed: boolean } {
  const seedText = env.HERMES_NEMESIS_SEED;
  const secondsText = env.HERMES_NEMESIS_SECONDS;
  const seed = seedText === undefined || seedText === "" ? Math.floor(Math.random() * 2 ** 31) : Number(seedText);
  const seconds = secondsText === undefined || secondsText === "" ? defaultSeconds : Number(secondsText);
  if (!Number.isInteger(seed) || seed < 0) throw new Error(`HERMES_NEMESIS_SEED must be a non-negative integer, got ${seedText}`);
  if (!Number.isFinite(seconds) || seconds <= 0) throw new Error(`HERMES_NEMESIS_SECONDS must be a positive number, got ${secondsText}`);
  return { seed, seconds, replayed: seedText !== undefined && seedText !== "" };
}

export function describeStep(s: NemesisStep): string {
  return `+${(s.atMs / 1000).toFixed(1)} s ${s.kind} ${s.targets.join(" <-/-> ")} for ${(s.holdMs / 1000).toFixed(1)} s`;
}

export function describePlan(plan: NemesisPlan): string {
  return [
    `nemesis seed ${plan.seed}, ${plan.seconds} s, ${plan.steps.length} faults (replay: HERMES_NEMESIS_SEED=${plan.seed} HERMES_NEMESIS_SECONDS=${plan.seconds})`,
    ...plan.steps.map((s) => `  ${describeStep(s)}`),
  ].join("\n");
}

export interface AppliedFault {
  step: NemesisStep;
  /** Wall-clock (Date.now) of the fault and of its heal. */
  startedAt: number;
  healedAt: number;
}

/**
 * Runs the plan against the named nodes (gateways and etcd members of `mesh`), in real time from now:
 * waits for each step's offset, applies the fault, holds it, heals it (restart, SIGCONT, heal of the
 * cut). Returns what was applied, with times, for the ledger. `onStep` sees every step as it starts.
 */
export async function runNemesis(
  mesh: Mesh,
  plan: NemesisPlan,
  nodes: ReadonlyMap<string, MeshNode>,
  options: { etcd?: readonly MeshNode[]; onStep?: (step: NemesisStep) => void } = {},
): Promise<AppliedFault[]> {
  const node = (name: string): MeshNode => {
    const n = nodes.get(name);
    if (!n) throw new Error(`nemesis: no node ${name}`);
    return n;
  };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
  const t0 = Date.now();
  const applied: AppliedFault[] = [];
  for (const step of plan.steps) {
    await sleep(t0 + step.atMs - Date.now());
    options.onStep?.(step);
    const startedAt = Date.now();
    const [first, second] = step.targets.map(node) as [MeshNode, MeshNode | undefined];
    let heal: () => Promise<void>;
    switch (step.kind) {
      case "kill-gateway":
      case "kill-etcd-member":
        await first.crash();
        heal = async () => {
          await first.restart();
        };
        break;
      case "pause-gateway":
      case "pause-etcd-member":
        await first.pause();
        heal = () => first.resume();
        break;
      case "cut-gateways":
        if (!second) throw new Error(`nemesis: ${step.kind} needs two targets`);
        heal = await mesh.cut(first, second);
        break;
      case "cut-gateway-from-etcd":
        heal = await mesh.cutAll(first, options.etcd ?? []);
        break;
    }
    await sleep(startedAt + step.holdMs - Date.now());
    await heal();
    applied.push({ step, startedAt, healedAt: Date.now() });
  }
  return applied;
}
