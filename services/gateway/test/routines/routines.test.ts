import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@grpc/grpc-js";
import { type Clock, type HermesError, openDatabase, toHermesError } from "@hermes/common";
import {
  type AddRoutineRequest,
  BotModeServiceClient,
  type ListRoutineRunsRequest,
  type Routine,
  type RoutineRef,
  type RoutineRun,
  type RoutineRunList,
} from "@hermes/proto/hermes/v1/botmode";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { GATEWAY_MIGRATIONS } from "../../src/home/store/migrations/index.js";
import { purgeProfileState, rekeyProfileState } from "../../src/identity/store/identity-store.js";
import type { RoutineRunView } from "../../src/routines/app/routine-service.js";
import { type RoutineRow, RoutinesStore } from "../../src/routines/store/routines-store.js";
import { botChat, createBot } from "../support/delivery-fixtures.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../support/fake-openai-server.js";
import { type GatedProvider, startGatedProvider } from "../support/gated-provider.js";
import { call, startTestGateway, type TestGateway } from "../support/gateway-harness.js";
import { RpcClient, type RpcError } from "../support/rpc-client.js";

/**
 * Routines in a real gateway: a 6-field schedule firing every second (each run a turn in the
 * bot's canonical Bot Chat), one run at a time, typed failures, rename and delete, the misfire
 * policy across a stop, a graceful stop under a run, and the refusals on both transports.
 * Nothing sleeps: every wait is a bounded poll for the recorded run.
 */

const EVERY_SECOND = "* * * * * *";

function botMode(t: TestGateway) {
  const client = t.client(BotModeServiceClient);
  const ref =
    <Res>(method: (req: RoutineRef, ...rest: never[]) => unknown) =>
    (job: string) =>
      call<RoutineRef, Res>(client as Client, method as never, { job });
  return {
    add: (req: Partial<AddRoutineRequest>) =>
      call<AddRoutineRequest, Routine>(client, client.addRoutine, {
        profile: "",
        name: "",
        schedule: "",
        tz: "UTC",
        prompt: "",
        misfire: "",
        ...req,
      }),
    runs: async (job: string) =>
      (await call<ListRoutineRunsRequest, RoutineRunList>(client, client.listRoutineRuns, { job, limit: 200 })).runs,
    pause: ref<Routine>(client.pauseRoutine),
    runNow: ref<RoutineRun>(client.runRoutineNow),
    remove: ref<unknown>(client.removeRoutine),
  };
}

/** Polls the recorded runs of `job` (newest first) until `check` passes. */
function runsWhen(t: TestGateway, job: string, check: (runs: RoutineRunView[]) => void, timeoutMs = 15_000): Promise<RoutineRunView[]> {
  return eventually(
    () => {
      const runs = t.gateway.routines.runs(job, 200);
      check(runs);
      return runs;
    },
    { timeoutMs, what: `the runs of ${job}` },
  );
}

/** The typed refusal `promise` rejects with, checked. */
async function expectHermesError(promise: Promise<unknown>, reason: string, message?: RegExp): Promise<HermesError> {
  const err = await promise.then(
    () => {
      throw new Error(`expected a ${reason} refusal`);
    },
    (e: unknown) => toHermesError(e),
  );
  expect(err.reason, err.message).toBe(reason);
  if (message) expect(err.message).toMatch(message);
  return err;
}

const ofState = (runs: RoutineRunView[], state: string) => runs.filter((r) => r.state === state);

function stateDbRows(home: string, sql: string, ...params: unknown[]): Record<string, unknown>[] {
  const db = new Database(join(home, "state.db"), { readonly: true });
  try {
    return db.prepare(sql).all(...params) as Record<string, unknown>[];
  } finally {
    db.close();
  }
}

describe("routines in a running gateway", () => {
  let t: TestGateway;
  let fake: FakeOpenAIServer;
  let gated: GatedProvider;

  beforeAll(async () => {
    fake = await startFakeOpenAIServer();
    gated = await startGatedProvider();
    t = await startTestGateway();
    createBot(t, "alice", { title: "Researcher" });
    createBot(
      t,
      "broken",
      { provider: "fake", model: "broken-model", providers: { fake: { base_url: fake.url } } },
      { FAKE_API_KEY: "sk-x" },
    );
    createBot(t, "slow", { provider: "gated", model: "m", providers: { gated: { base_url: gated.url } } }, { GATED_API_KEY: "unused" });
    fake.failModel("broken-model", "unauthorized");
  });
  afterAll(async () => {
    gated?.open();
    await t?.destroy();
    await fake?.close();
    await gated?.close();
  });

  it("a 6-field schedule fires every second; each run is a turn in the canonical Bot Chat", async () => {
    const api = botMode(t);
    const added = await api.add({ profile: "alice", name: "Tick", schedule: EVERY_SECOND, prompt: "Say the time." });
    expect(added).toMatchObject({
      job: "[bot:alice] Tick",
      schedule: EVERY_SECOND,
      tz: "UTC",
      misfire: "skip",
      grace_seconds: 300,
      paused: false,
    });
    expect(Date.parse(added.next_run!) % 1000).toBe(0);

    const runs = await runsWhen(t, "[bot:alice] Tick", (r) => expect(ofState(r, "settled").length).toBeGreaterThanOrEqual(2));
    await api.pause("[bot:alice] Tick");
    const settled = ofState(runs, "settled");
    for (const run of settled) {
      expect(run).toMatchObject({ trigger: "schedule", reason: null, error: null });
      expect(Date.parse(run.scheduled_for!) % 1000).toBe(0);
      expect(run.reply).toContain("Routine [bot:alice] Tick scheduled for");
    }
    expect(new Set(runs.map((r) => r.scheduled_for)).size).toBe(runs.length);

    // The runs are turns of alice's Bot Chat: a header line, then the prompt verbatim.
    const routineTurns = botChat(t, "alice").filter((m) => m.role === "user" && m.meta["routine"] === "[bot:alice] Tick");
    expect(routineTurns.length).toBeGreaterThanOrEqual(settled.length);
    // The header leaves out ":00" seconds, so a run on a whole minute reads "03:07 UTC".
    expect(routineTurns[0]!.content).toMatch(
      /^Routine \[bot:alice\] Tick scheduled for \d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)? UTC:\nSay the time\.$/,
    );
    // …so a chat with the bot has them in context.
    const out = await t.gateway.chat.turn({ profile: "alice", text: "what was my last message?" });
    expect(out.reply).toContain("Routine [bot:alice] Tick scheduled for");

    const listed = t.gateway.routines.list("alice").find((r) => r.job === "[bot:alice] Tick")!;
    expect(listed).toMatchObject({ paused: true, next_run: null });
    expect(listed.last_run?.state).toMatch(/settled|running/);

    const metrics = await (await fetch(`http://${t.gateway.httpAddress}/metrics`)).text();
    expect(metrics).toMatch(/hermes_routine_runs_total\{(?=[^}]*state="settled")(?=[^}]*reason="none")[^}]*\} [1-9]/);
    expect(metrics).toMatch(/hermes_routine_lateness_seconds_count\{[^}]*trigger="schedule"[^}]*\} [1-9]/);
    expect(metrics).toMatch(/hermes_routines\{[^}]*state="paused"[^}]*\} 1/);
  });

  it("one run at a time: a time that comes while the previous run is running is skipped_overlap, never queued", async () => {
    const api = botMode(t);
    await api.add({ profile: "slow", name: "Slow", schedule: EVERY_SECOND, prompt: "Take your time." });
    const runs = await runsWhen(t, "[bot:slow] Slow", (r) => expect(ofState(r, "skipped_overlap").length).toBeGreaterThanOrEqual(2));
    expect(ofState(runs, "running")).toHaveLength(1);
    expect(gated.held()).toBe(1);
    expect(ofState(runs, "skipped_overlap")[0]!.detail).toContain("previous run of this routine was still running");
    await expectHermesError(api.runNow("[bot:slow] Slow"), "refused", /one run at a time/);
    await api.pause("[bot:slow] Slow");

    gated.release("done slowly");
    const after = await runsWhen(t, "[bot:slow] Slow", (r) => expect(ofState(r, "running")).toHaveLength(0));
    expect(ofState(after, "settled")).toHaveLength(1);
    expect(ofState(after, "settled")[0]!.reply).toBe("done slowly");
    expect(gated.prompts.filter((p) => p.startsWith("Routine [bot:slow] Slow"))).toHaveLength(1);
  });

  it("a failing provider: the run is failed with its typed reason and the provider's error", async () => {
    const api = botMode(t);
    await api.add({ profile: "broken", name: "Report", schedule: "0 0 1 1 *", prompt: "Write the report." });
    const started = await api.runNow("[bot:broken] Report");
    expect(started).toMatchObject({ state: "running", trigger: "manual", job: "[bot:broken] Report" });
    expect(started.scheduled_for).toBeUndefined();
    const [run] = await runsWhen(t, "[bot:broken] Report", (r) => expect(r[0]!.state).toBe("failed"));
    expect(run).toMatchObject({ run_id: started.run_id, reason: "provider_auth_or_access", reply: null });
    expect(run!.error).toMatch(/\S/);
    const metrics = await (await fetch(`http://${t.gateway.httpAddress}/metrics`)).text();
    expect(metrics).toMatch(/hermes_routine_runs_total\{(?=[^}]*reason="provider_auth_or_access")(?=[^}]*state="failed")[^}]*\} 1/);
  });

  it("a rename carries routines and their history (the old name still resolves); a delete removes them", async () => {
    createBot(t, "bob", { title: "Reviewer" });
    const api = botMode(t);
    await api.add({ profile: "bob", name: "Daily", schedule: "0 8 * * *", prompt: "Plan the day." });
    await api.runNow("[bot:bob] Daily");
    await runsWhen(t, "[bot:bob] Daily", (r) => expect(r[0]!.state).toBe("settled"));

    const renamed = t.gateway.profiles.rename("bob", "robert");
    expect(renamed.migration?.counts).toMatchObject({ routines: 1, routine_runs: 1 });
    expect(t.gateway.routines.list("robert").map((r) => r.job)).toEqual(["[bot:robert] Daily"]);
    // The former name resolves, and the next run speaks with the new one.
    await api.runNow("[bot:bob] Daily");
    const runs = await runsWhen(t, "[bot:robert] Daily", (r) => expect(ofState(r, "settled")).toHaveLength(2));
    expect(runs[0]!.reply).toContain("Routine [bot:robert] Daily (run now)");

    const deleted = t.gateway.profiles.delete("robert");
    expect(deleted.purged).toMatchObject({ routines: 1, routine_runs: 2 });
    expect(t.gateway.routines.list().filter((r) => r.profile === "robert")).toEqual([]);
    expect(stateDbRows(t.home, "SELECT * FROM routines WHERE profile = ?", "robert")).toEqual([]);
    expect(stateDbRows(t.home, "SELECT * FROM routine_runs WHERE profile = ?", "robert")).toEqual([]);
    await expectHermesError(api.runNow("[bot:robert] Daily"), "not_found");
  });

  it("two bots' routines of one name stay apart: each runs in its own chat; pausing one leaves the other", async () => {
    const api = botMode(t);
    for (const profile of ["una", "vic"]) {
      createBot(t, profile);
      await api.add({ profile, name: "Same", schedule: "0 0 1 1 *", prompt: `For ${profile}.` });
    }
    await api.pause("[bot:una] Same");
    await api.runNow("[bot:vic] Same");
    await runsWhen(t, "[bot:vic] Same", (r) => expect(r.map((run) => run.state)).toEqual(["settled"]));
    expect(t.gateway.routines.runs("[bot:una] Same", 200)).toEqual([]);
    expect(t.gateway.routines.list("una")).toMatchObject([{ job: "[bot:una] Same", paused: true }]);
    expect(t.gateway.routines.list("vic")).toMatchObject([{ job: "[bot:vic] Same", paused: false }]);
    const routineTurns = (profile: string) => botChat(t, profile).filter((m) => m.role === "user" && m.meta["routine"] !== undefined);
    expect(routineTurns("una")).toEqual([]);
    expect(routineTurns("vic").map((m) => [m.meta["routine"], m.content])).toEqual([
      ["[bot:vic] Same", expect.stringContaining("For vic.")],
    ]);
  });

  it("refuses bad routines naming the field and what is valid, the same over gRPC and JSON-RPC", async () => {
    const api = botMode(t);
    const base = { profile: "alice", name: "Bad", schedule: "0 8 * * *", prompt: "p" };
    const cases: [Partial<AddRoutineRequest>, string, RegExp][] = [
      [{ schedule: "0 8 * *" }, "invalid_params", /^schedule: "0 8 \* \*" has 4 fields; it must be 5 fields/],
      [{ schedule: "61 * * * *" }, "invalid_params", /^schedule: .*is not valid/],
      [{ schedule: "@daily" }, "invalid_params", /^schedule: "@daily" is a nickname.*0 0 \* \* \*/],
      [{ schedule: "0 0 30 2 *" }, "invalid_params", /^schedule: .*never fires/],
      [{ tz: "Mars/Olympus" }, "invalid_params", /^tz: "Mars\/Olympus" is not a known time zone; it must be an IANA time zone name/],
      [{ tz: "+01:00" }, "invalid_params", /^tz: .*UTC offset/],
      [{ misfire: "twice" }, "invalid_params", /^misfire: must be one of skip, run-once/],
      [{ grace_seconds: 0 }, "invalid_params", /^grace: must be a whole number of seconds from 1 to 86400/],
      [{ grace_seconds: Number.NaN }, "invalid_params", /^grace: /],
      [{ prompt: "   " }, "invalid_params", /^prompt: is empty/],
      [{ prompt: "x".repeat(16_001) }, "payload_too_large", /^prompt: is 16,001 characters; the limit is 16,000/],
      [{ name: "Tick" }, "already_exists", /^name: \[bot:alice\] Tick already exists/],
      [{ name: "" }, "invalid_params", /^name: /],
      [{ profile: "nobody" }, "not_found", /unknown profile nobody/],
    ];
    const rpc = await RpcClient.connect(t.gateway.httpAddress);
    try {
      for (const [change, reason, message] of cases) {
        const req = { ...base, ...change };
        const viaGrpc = await expectHermesError(api.add(req), reason, message);
        const viaRpc: RpcError = await rpc.error("routines.add", { ...req, tz: req.tz ?? "UTC" });
        expect(viaRpc.data.reason, JSON.stringify(change)).toBe(reason);
        // JSON-RPC carries NaN as null, which the same check refuses with the same field.
        if (!Number.isNaN(change.grace_seconds)) expect(viaRpc.message).toBe(viaGrpc.message);
      }
      const badJob = await rpc.error("routines.runs", { job: "Tick" });
      expect(badJob).toMatchObject({ code: -32602, data: { reason: "invalid_params", field: "job" } });
      expect(badJob.message).toContain("'[bot:<profile>] <name>'");
    } finally {
      rpc.close();
    }
    expect(t.gateway.routines.list("alice").map((r) => r.name)).toEqual(["Tick"]);
  });

  it("a graceful stop under a run records it failed runtime_offline", async () => {
    const home = mkdtempSync(join(tmpdir(), "hermes-rt-stop-"));
    writeFileSync(join(home, "config.yaml"), "gateway:\n  shutdown_grace_seconds: 0.2\n");
    const g = await startTestGateway({ home });
    try {
      createBot(g, "slow", { provider: "gated", model: "m", providers: { gated: { base_url: gated.url } } }, { GATED_API_KEY: "unused" });
      g.gateway.routines.add({ profile: "slow", name: "Held", schedule: "0 0 1 1 *", tz: "UTC", prompt: "hold" });
      const heldBefore = gated.held();
      g.gateway.routines.runNow("[bot:slow] Held");
      await eventually(() => expect(gated.held()).toBe(heldBefore + 1));
      await g.stop();
      const [row] = stateDbRows(home, "SELECT state, reason, error FROM routine_runs");
      expect(row).toEqual({
        state: "failed",
        reason: "runtime_offline",
        error: "the gateway stopped during the run; it was not run again",
      });
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe("a gateway stopped across scheduled times", () => {
  const T = (hms: string) => Date.parse(`2026-05-04T${hms}Z`);
  let now = T("10:00:30");
  const clock: Clock = { now: () => now };
  let home: string;

  beforeAll(() => {
    home = mkdtempSync(join(tmpdir(), "hermes-rt-misfire-"));
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it("skip records the times missed; run-once records them and starts exactly one catch-up run; a run cut off is failed", async () => {
    const first = await startTestGateway({ home, clock });
    createBot(first, "early");
    for (const [name, misfire] of [
      ["Skipper", "skip"],
      ["Catcher", "run-once"],
    ] as const) {
      first.gateway.routines.add({
        profile: "early",
        name,
        schedule: "0 * * * * *",
        tz: "UTC",
        prompt: "Report.",
        misfire,
        grace_seconds: 5,
      });
    }
    await first.stop();

    // While it is down: three scheduled times pass (10:01, 10:02, 10:03), and a crash left a run `running`.
    const db = new Database(join(home, "state.db"));
    const catcher = db.prepare("SELECT routine_id FROM routines WHERE name = 'Catcher'").get() as { routine_id: string };
    db.prepare(
      "INSERT INTO routine_runs (run_id, routine_id, profile, state, trigger, started_at) VALUES ('rrun_crashed', ?, 'early', 'running', 'manual', ?)",
    ).run(catcher.routine_id, new Date(T("10:00:40")).toISOString());
    db.close();
    now = T("10:03:30");

    const second = await startTestGateway({ home, clock });
    try {
      const skipped = second.gateway.routines.runs("[bot:early] Skipper", 200);
      expect(skipped.map((r) => [r.state, r.scheduled_for])).toEqual([
        ["missed", "2026-05-04T10:03:00.000Z"],
        ["missed", "2026-05-04T10:02:00.000Z"],
        ["missed", "2026-05-04T10:01:00.000Z"],
      ]);
      expect(skipped[0]!.detail).toContain("grace of 5 s");

      const caught = await runsWhen(second, "[bot:early] Catcher", (r) => expect(r[0]!.state).toBe("settled"));
      expect(caught.map((r) => [r.state, r.trigger, r.scheduled_for])).toEqual([
        ["settled", "catch_up", "2026-05-04T10:03:00.000Z"],
        ["missed", "schedule", "2026-05-04T10:03:00.000Z"],
        ["missed", "schedule", "2026-05-04T10:02:00.000Z"],
        ["missed", "schedule", "2026-05-04T10:01:00.000Z"],
        ["failed", "manual", null],
      ]);
      expect(caught[0]!.late_ms).toBe(30_000);
      expect(caught[0]!.reply).toContain("(catching up after missed runs)");
      expect(caught[4]).toMatchObject({ run_id: "rrun_crashed", reason: "runtime_offline" });
      // Both cursors moved to 10:03: the next start has nothing more to account for.
      expect(second.gateway.routines.list("early").map((r) => r.next_run)).toEqual([
        "2026-05-04T10:04:00.000Z",
        "2026-05-04T10:04:00.000Z",
      ]);
    } finally {
      await second.stop();
    }
  });
});

describe("routines in the identity registry", () => {
  it("a rekey onto a profile that has a routine of the same name (any case) is refused, writing nothing; a purge is one transaction", () => {
    const dir = mkdtempSync(join(tmpdir(), "hermes-rt-rekey-"));
    const db = openDatabase(join(dir, "state.db"), { label: "test state.db", migrations: GATEWAY_MIGRATIONS });
    try {
      const store = new RoutinesStore(db);
      const row = (routine_id: string, profile: string, name: string): RoutineRow => ({
        routine_id,
        profile,
        name,
        name_key: name.toLowerCase(),
        schedule: "0 8 * * *",
        tz: "UTC",
        prompt: "p",
        misfire: "skip",
        grace_seconds: 300,
        paused: false,
        cursor_ms: 0,
        created_at: "2026-05-04T00:00:00.000Z",
        updated_at: "2026-05-04T00:00:00.000Z",
      });
      store.insertRoutine(row("r1", "pia", "Same"));
      store.insertRoutine(row("r2", "quinn", "same"));
      store.insertRoutine(row("r3", "pia", "Other"));
      const before = db.prepare("SELECT * FROM routines ORDER BY routine_id").all();
      expect(() => rekeyProfileState(db, "pia", "quinn")).toThrow(/routines: quinn already owns \{"name_key":"same"\}/);
      expect(db.prepare("SELECT * FROM routines ORDER BY routine_id").all()).toEqual(before);
      // Without the clash both routines move, and their runs with them.
      store.deleteRoutine("r2");
      store.insertRun({
        run_id: "rrun_1",
        routine_id: "r1",
        profile: "pia",
        state: "settled",
        trigger: "manual",
        scheduled_for: null,
        started_at: null,
        ended_at: null,
        late_ms: 0,
        reason: null,
        error: null,
        reply: "ok",
        session_id: null,
        detail: null,
      });
      expect(rekeyProfileState(db, "pia", "quinn")).toEqual({ routines: 2, routine_runs: 1 });

      // A delete purges runs and routines in one transaction: a failure at the routines leaves the runs too.
      db.exec("CREATE TRIGGER refuse_routine_delete BEFORE DELETE ON routines BEGIN SELECT RAISE(ABORT, 'disk said no'); END");
      expect(() => purgeProfileState(db, "quinn")).toThrow(/disk said no/);
      expect(db.prepare("SELECT count(*) AS n FROM routine_runs WHERE profile = 'quinn'").get()).toEqual({ n: 1 });
      db.exec("DROP TRIGGER refuse_routine_delete");
      expect(purgeProfileState(db, "quinn")).toMatchObject({ routines: 2, routine_runs: 1 });
      expect(db.prepare("SELECT count(*) AS n FROM routines").get()).toEqual({ n: 0 });
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
