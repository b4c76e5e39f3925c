import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { credentials } from "@grpc/grpc-js";
import { type AddRoutineRequest, BotModeServiceClient, type Routine, type RoutineRef } from "@hermes/proto/hermes/v1/botmode";
import { type CreateProfileRequest, GatewayServiceClient, type Profile } from "@hermes/proto/hermes/v1/gateway";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { type DaemonProcess, startGatewayProcess } from "../../../../test/support/daemons.js";
import { eventually } from "../../../../test/support/eventually.js";
import { type GatedProvider, startGatedProvider } from "../support/gated-provider.js";
import { call, TEST_KEY } from "../support/gateway-harness.js";

/**
 * kill -9 a gateway PROCESS while a routine's run is held mid-turn by the provider, keep it down
 * across scheduled times, start it again on the same home: the cut-off run is failed
 * `runtime_offline` and never sent again, the times that passed while it was down are recorded
 * `missed` (only the newest may start: on time, or as the one `run-once` catch-up), and every
 * scheduled second from the first run to the last is accounted for exactly once: no double run,
 * no time dropped without a row. Runs the built `hermes gateway start` with real per-second schedules.
 */

const SECOND = 1000;
const homes: string[] = [];
const daemons: DaemonProcess[] = [];
let gated: GatedProvider;

beforeAll(async () => {
  gated = await startGatedProvider();
});
afterAll(async () => {
  for (const d of daemons) await d.kill9();
  gated?.open();
  await gated?.close();
  for (const h of homes) rmSync(h, { recursive: true, force: true });
});

async function startChild(home: string): Promise<DaemonProcess> {
  const daemon = await startGatewayProcess(home, { env: { API_SERVER_KEY: TEST_KEY } });
  daemons.push(daemon);
  return daemon;
}

interface RunRow {
  run_id: string;
  routine: string;
  state: string;
  trigger: string | null;
  scheduled_for: string | null;
  reason: string | null;
  error: string | null;
}

/** Every run row of the home's state.db, oldest scheduled time first, read with a separate connection. */
function runRows(home: string): RunRow[] {
  const db = new Database(join(home, "state.db"), { readonly: true });
  try {
    return db
      .prepare(
        `SELECT r.run_id, t.name AS routine, r.state, r.trigger, r.scheduled_for, r.reason, r.error
         FROM routine_runs r JOIN routines t USING (routine_id) ORDER BY r.scheduled_for, r.run_id`,
      )
      .all() as RunRow[];
  } finally {
    db.close();
  }
}

const of = (rows: RunRow[], routine: string) => rows.filter((r) => r.routine === routine);

/**
 * The header line a run's turn starts with (what the provider receives), for a scheduled time: the
 * seconds are left out on the full minute, as the turn message writes it.
 */
function turnHeader(job: string, scheduledFor: string): string {
  const seconds = scheduledFor.slice(17, 19);
  return `Routine ${job} scheduled for ${scheduledFor.slice(0, 10)} ${scheduledFor.slice(11, 16)}${seconds === "00" ? "" : `:${seconds}`} UTC`;
}

/** The scheduled seconds of `rows` are every second from the first to the last, each exactly once. */
function expectEverySecondOnce(rows: RunRow[]): void {
  const times = rows.filter((r) => r.scheduled_for !== null && r.trigger !== "catch_up").map((r) => Date.parse(r.scheduled_for!));
  expect(times.length).toBeGreaterThan(0);
  const first = times[0]!;
  expect(times).toEqual(Array.from({ length: times.length }, (_, i) => first + i * SECOND));
}

describe("kill -9 under a running routine, down across scheduled times, then started", () => {
  it("the cut-off run is failed runtime_offline and not re-run; the downtime is missed; every second is accounted for once", async () => {
    const home = mkdtempSync(join(tmpdir(), "hermes-rt-crash-"));
    homes.push(home);
    const first = await startChild(home);
    const gw = new GatewayServiceClient(first.grpc, credentials.createInsecure());
    const botMode = new BotModeServiceClient(first.grpc, credentials.createInsecure());
    for (const name of ["slow", "catcher"]) {
      await call<CreateProfileRequest, Profile>(gw, gw.createProfile, {
        name,
        title: "",
        description: "",
        model: "",
        provider: "",
        clone_from: "",
        soul: "",
      });
      writeFileSync(
        join(home, "profiles", name, "config.yaml"),
        stringify({ provider: "gated", model: "m", providers: { gated: { base_url: gated.url } } }),
      );
      writeFileSync(join(home, "profiles", name, ".env"), "GATED_API_KEY=unused\n", { mode: 0o600 });
    }
    const add = (req: Omit<AddRoutineRequest, "tz" | "grace_seconds"> & { grace_seconds?: number }) =>
      call<AddRoutineRequest, Routine>(botMode, botMode.addRoutine, { tz: "UTC", ...req });
    await add({ profile: "slow", name: "Skipper", schedule: "* * * * * *", prompt: "Hold on.", misfire: "skip" });
    await add({ profile: "catcher", name: "Catcher", schedule: "* * * * * *", prompt: "Hold on.", misfire: "run-once", grace_seconds: 1 });

    // Both first runs are held mid-turn by the provider; the seconds after them are skipped_overlap.
    await eventually(
      () => {
        const rows = runRows(home);
        for (const routine of ["Skipper", "Catcher"]) {
          expect(of(rows, routine).filter((r) => r.state === "running")).toHaveLength(1);
          expect(of(rows, routine).filter((r) => r.state === "skipped_overlap").length).toBeGreaterThanOrEqual(1);
        }
        expect(gated.held()).toBe(2);
      },
      { what: "both routines running, held by the provider, with overlapping seconds skipped" },
    );
    await first.kill9();
    const killedAt = Date.now();
    const cutOff = runRows(home).filter((r) => r.state === "running");
    expect(cutOff).toHaveLength(2);
    const promptsBefore = gated.prompts.length;

    // Down across two scheduled seconds at least; from now on the provider answers at once.
    await eventually(() => Date.now() >= Math.ceil(killedAt / SECOND) * SECOND + 2 * SECOND, {
      what: "two scheduled seconds passing while the gateway is down",
    });
    gated.open();
    const second = await startChild(home);
    const settledAfterRestart = (rows: RunRow[], routine: string) =>
      of(rows, routine).filter((r) => r.state === "settled" && Date.parse(r.scheduled_for!) > killedAt);
    await eventually(
      () => {
        const rows = runRows(home);
        for (const routine of ["Skipper", "Catcher"]) expect(settledAfterRestart(rows, routine).length).toBeGreaterThanOrEqual(2);
      },
      { what: "runs settling after the restart" },
    );
    const again = new BotModeServiceClient(second.grpc, credentials.createInsecure());
    for (const job of ["[bot:slow] Skipper", "[bot:catcher] Catcher"]) await call<RoutineRef, Routine>(again, again.pauseRoutine, { job });
    await eventually(() => expect(runRows(home).filter((r) => r.state === "running")).toEqual([]), { what: "the last runs ending" });
    const rows = runRows(home);

    for (const [routine, job] of [
      ["Skipper", "[bot:slow] Skipper"],
      ["Catcher", "[bot:catcher] Catcher"],
    ] as const) {
      const runs = of(rows, routine);
      const crashed = cutOff.find((r) => r.routine === routine)!;
      // The cut-off run: failed runtime_offline, its turn never sent again.
      expect(runs.find((r) => r.run_id === crashed.run_id)).toMatchObject({
        state: "failed",
        reason: "runtime_offline",
        error: "the gateway stopped during the run; it was not run again",
      });
      const header = turnHeader(job, crashed.scheduled_for!);
      expect(gated.prompts.filter((p) => p.startsWith(header))).toHaveLength(1);
      expect(gated.prompts.slice(promptsBefore).filter((p) => p.startsWith(header))).toEqual([]);

      // The times that passed while it was down: missed, except that the newest may start (on time
      // within the grace, or as the one catch-up run of run-once); nothing else ran for them.
      const lastBeforeKill = Math.max(
        ...runs.filter((r) => r.state !== "missed" && Date.parse(r.scheduled_for!) <= killedAt).map((r) => Date.parse(r.scheduled_for!)),
      );
      const down = runs.filter((r) => r.state === "missed");
      expect(down.length).toBeGreaterThanOrEqual(1);
      for (const r of down) expect(Date.parse(r.scheduled_for!)).toBeGreaterThan(lastBeforeKill);
      const startedForDowntime = runs.filter(
        (r) =>
          r.state !== "missed" &&
          r.state !== "skipped_overlap" &&
          Date.parse(r.scheduled_for!) > lastBeforeKill &&
          Date.parse(r.scheduled_for!) <= Date.parse(down.at(-1)!.scheduled_for!),
      );
      expect(startedForDowntime.length).toBeLessThanOrEqual(1);

      // Every scheduled second from the first run to the last has exactly one row (run, skipped, missed).
      expectEverySecondOnce(runs);
      // No run's turn reached the provider twice.
      const headers = runs.filter((r) => r.state === "settled").map((r) => turnHeader(job, r.scheduled_for!));
      for (const h of headers)
        expect(
          gated.prompts.filter((p) => p.startsWith(h)),
          h,
        ).toHaveLength(1);
    }

    // The runs are turns of each bot's canonical Bot Chat.
    const chat = new Database(join(home, "profiles", "slow", "state.db"), { readonly: true });
    try {
      const turns = chat.prepare("SELECT content FROM messages WHERE role = 'user' AND meta_json LIKE '%[bot:slow] Skipper%'").all();
      expect(turns.length).toBeGreaterThanOrEqual(settledAfterRestart(rows, "Skipper").length);
    } finally {
      chat.close();
    }
    expect((await second.stop()).code).toBe(0);
  });
});
