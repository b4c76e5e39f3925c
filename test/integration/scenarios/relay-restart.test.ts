// Relay restart mid-delivery: bots on gw-a and gw-c message a slow bot on gw-b through the relay;
// while the first turn is held mid-turn at the (gated) model provider and another message waits in
// the relay's queue, the relay container is killed (kill -9) and started again on the same volume.
// Nothing is lost (every delivery settles with its own reply), the per-target order holds, and no
// turn runs twice: each message reaches the model once and sits in the target's transcript once.
import { beforeAll, describe, expect, it } from "vitest";
import { eventually, type GatedProvider, type GatewayNode, Ledger, type RelayNode, startGatedProvider, useMesh } from "../harness/index.js";

interface Receipt {
  delivery_id: string;
  state: string;
  reason: string | null;
  attempts: number;
  reply: string | null;
}

const GATEWAY_CONFIG = "delivery:\n  retry_delay_seconds: 0\n";
const TARGET_CONFIG = `${GATEWAY_CONFIG}providers:\n  gated: {base_url: "http://provider:8080/v1", api_key_env: GATED_KEY}\n`;

describe("scenario: relay restart mid-delivery", () => {
  const mesh = useMesh("relay-restart");
  let relay: RelayNode;
  let provider: GatedProvider;
  let a: GatewayNode;
  let b: GatewayNode;
  let c: GatewayNode;

  const relayState = async (gw: GatewayNode) => (await gw.hermesJson<{ relay?: { state: string } }>(["gateway", "status"])).relay?.state;

  beforeAll(async () => {
    const lan = await mesh.network("lan");
    [relay, provider] = await Promise.all([mesh.relay({ name: "relay", networks: [lan] }), startGatedProvider(mesh, "provider", [lan])]);
    const [keyA, keyB, keyC] = await Promise.all([relay.addKey("gw-a"), relay.addKey("gw-b"), relay.addKey("gw-c")]);
    [a, c, b] = await Promise.all([
      mesh.gateway({ name: "gw-a", networks: [lan], relay: { url: relay.grpcUrl, key: keyA }, config: GATEWAY_CONFIG }),
      mesh.gateway({ name: "gw-c", networks: [lan], relay: { url: relay.grpcUrl, key: keyC }, config: GATEWAY_CONFIG }),
      mesh.gateway({
        name: "gw-b",
        networks: [lan],
        relay: { url: relay.grpcUrl, key: keyB },
        config: TARGET_CONFIG,
        env: { GATED_KEY: "sk-gated-test" },
      }),
    ]);
    for (const [gw, args] of [
      [a, ["profile", "create", "alice", "--title", "Planner"]],
      [c, ["profile", "create", "dora", "--title", "Reviewer"]],
      [b, ["profile", "create", "slowbot", "--title", "Slow worker", "--provider", "gated", "--model", "gated-model"]],
    ] as const) {
      const out = await gw.hermes([...args]);
      expect(out.exitCode, out.stderr).toBe(0);
    }
    await eventually(
      async () => {
        const states = await Promise.all([a, b, c].map(relayState));
        return states.every((s) => s === "connected");
      },
      { what: "every gateway connected to the relay" },
    );
  });

  it("loses nothing and runs no turn twice", async () => {
    const ledger = new Ledger("relay-restart");
    /** `-p FROM message slowbot@gw-b TEXT --id ID` on the sender's gateway; the id makes a retry idempotent. */
    const send = (from: string, id: string, text: string) => {
      const gw = from === "dora" ? c : a;
      return ledger.record(
        { eventId: id, room: "slowbot@gw-b", via: `${from}@${gw.name}` },
        () =>
          // The relay roster may not list slowbot on gw-a yet: retry the same id until it does.
          eventually(
            async () => {
              const out = await gw.hermes(["--json", "-p", from, "message", "slowbot@gw-b", text, "--id", id]);
              if (out.exitCode !== 0) throw new Error(out.stderr);
              return JSON.parse(out.stdout) as { status: string; delivery_id: string };
            },
            { what: `${id} to be queued` },
          ),
        { ack: () => ({ seq: ledger.all.length, epoch: 0 }) },
      );
    };
    const tasks = [
      { from: "alice", id: "task-1", text: "task-1: draft the plan" },
      { from: "dora", id: "dora-1", text: "dora-1: review the draft" },
      { from: "alice", id: "task-2", text: "task-2: list the risks" },
      { from: "alice", id: "task-3", text: "task-3: write the summary" },
    ];

    // task-1 is held mid-turn at the provider; dora-1 (from gw-c) waits behind it in slowbot's lane
    // at the relay; task-2 and task-3 wait in gw-a's own lane for slowbot@gw-b behind task-1.
    await send("alice", tasks[0]!.id, tasks[0]!.text);
    await eventually(async () => (await provider.state()).held === 1, { what: "task-1 to be mid-turn on gw-b" });
    for (const t of tasks.slice(1)) await send(t.from, t.id, t.text);
    await eventually(
      async () => {
        const s = await relay.hermesJson<{ queued: number; in_flight: number }>(["relay", "status", "--data", "/data"]);
        if (s.queued + s.in_flight < 2) throw new Error(`relay status: ${JSON.stringify(s)}`);
        return s;
      },
      { what: "the relay to hold dora-1 and task-1" },
    );

    // kill -9 of the relay; the held turn ends while it is down (its result cannot reach it).
    await relay.crash();
    await eventually(async () => (await relayState(a)) !== "connected", { what: "gw-a to lose the relay" });
    await provider.release("done: task-1");
    await relay.restart();
    await eventually(async () => (await Promise.all([a, b, c].map(relayState))).every((s) => s === "connected"), {
      what: "every gateway back on the relay",
      timeoutMs: 45_000,
    });

    // The rest run one at a time, in order; each answer names the task it was given.
    const receipts = await eventually(
      async () => {
        const s = await provider.state();
        if (s.held > 0) {
          const id = /(task-\d|dora-\d)/.exec(s.prompts.at(-1) ?? "")?.[1] ?? "?";
          await provider.release(`done: ${id}`);
        }
        const all = await Promise.all(tasks.map((t) => (t.from === "dora" ? c : a).hermesJson<Receipt>(["deliveries", "show", t.id])));
        return all.every((r) => r.state === "settled") ? all : false;
      },
      { what: "every delivery to settle", timeoutMs: 60_000, intervalMs: 300 },
    );
    for (const [i, r] of receipts.entries()) {
      expect(r, tasks[i]!.id).toMatchObject({ delivery_id: tasks[i]!.id, state: "settled", reply: `done: ${tasks[i]!.id}` });
      expect(r.attempts).toBeLessThanOrEqual(2);
    }

    // No turn ran twice: each message reached the model once and is in slowbot's transcript once.
    const { prompts } = await provider.state();
    for (const t of tasks)
      expect(
        prompts.filter((p) => p.endsWith(t.text)),
        `${t.id} prompts`,
      ).toHaveLength(1);
    const chat = await b.botChat("slowbot");
    const turns = chat.filter((m) => m.role === "user").map((m) => /(task-\d|dora-\d): /.exec(m.content)?.[1] ?? m.content);
    const verdict = ledger.verify({ main: turns.map((id) => ({ eventId: id, room: "slowbot@gw-b" })) });
    ledger.assertClean(verdict);
    expect(turns.filter((id) => id.startsWith("task-"))).toEqual(["task-1", "task-2", "task-3"]); // gw-a's order held
    expect(turns.sort()).toEqual(tasks.map((t) => t.id).sort());
    console.log(`[relay-restart] attempts: ${receipts.map((r) => `${r.delivery_id}=${r.attempts}`).join(", ")}`);
  });
});
