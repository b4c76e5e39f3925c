import { credentials } from "@grpc/grpc-js";
import { authMetadata, type HermesError, unaryCall } from "@hermes/common";
import { RelayServiceClient, type TunnelReply } from "@hermes/proto/hermes/v1/relay";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { envelope, FakeGateway } from "./support/fake-gateway.js";
import { startTestRelay, type TestRelay } from "./support/relay-harness.js";

/**
 * The relay's protocol, end to end over real gRPC on 127.0.0.1, with gateways played by hand
 * (FakeGateway): auth, hello, roster propagation, the durable queue and its lanes, TTL, target
 * loss, idempotency, bad input, restart, revocation and the tunnel.
 */

let t: TestRelay;
const keys: Record<string, string> = {};
const open: FakeGateway[] = [];

async function gw(connection: string, key = keys[connection]!, gatewayId?: string): Promise<FakeGateway> {
  const g = await FakeGateway.connect(t.relay.grpcAddress, key, connection, gatewayId);
  open.push(g);
  return g;
}

beforeAll(async () => {
  t = await startTestRelay();
  for (const c of ["a", "b", "c", "d", "e"]) keys[c] = t.relay.keys.add(c).key;
});
afterEach(async () => {
  for (const g of open.splice(0)) await g.close();
});
afterAll(async () => {
  await t?.destroy();
});

const A = { profile: "alice", gateway: "gw-a" };

describe("health and metrics", () => {
  it("serves /livez, /readyz and /metrics with the relay series", async () => {
    const base = `http://${t.relay.httpAddress}`;
    expect((await fetch(`${base}/livez`)).status).toBe(200);
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    for (const name of [
      "hermes_relay_queue_depth",
      "hermes_relay_connections",
      "hermes_relay_deliveries_total",
      "hermes_relay_roster_epoch",
    ]) {
      expect(metrics).toContain(name);
    }
  });
});

describe("authentication", () => {
  it("refuses a stream without a key or with an unknown key (unauthenticated), and nothing changes", async () => {
    const epoch = t.relay.roster.epoch;
    for (const key of [undefined, "hrk_not-a-key"]) {
      const g = new FakeGateway(t.relay.grpcAddress, key);
      g.write({ frame: { $case: "hello", value: { connection: "a", gateway_id: "x", version: "t" } } });
      const end = await g.ended;
      expect(end.error?.reason).toBe("unauthenticated");
      await g.close();
    }
    expect(t.relay.roster.epoch).toBe(epoch);
    expect(t.relay.sessions.size).toBe(0);
  });

  it("a gateway presenting another connection's key gets a typed error; the real one keeps its stream", async () => {
    const a = await gw("a");
    const epoch = t.relay.roster.epoch;
    const impostor = new FakeGateway(t.relay.grpcAddress, keys["b"]);
    impostor.write({ frame: { $case: "hello", value: { connection: "a", gateway_id: "evil", version: "t" } } });
    const end = await impostor.ended;
    expect(end.error?.reason).toBe("unauthenticated");
    expect(end.error?.message).toContain("this key belongs to connection b");
    await impostor.close();
    expect(t.relay.roster.epoch).toBe(epoch);
    expect(t.relay.sessions.get("a")).toBeDefined();
    // a still works: it can announce and is answered.
    a.announce([{ handle: "alice" }]);
    await a.next("roster", (r) => r.epoch > epoch);
  });

  it("a hello without a valid gateway id is refused (invalid_params) and nothing changes", async () => {
    const epoch = t.relay.roster.epoch;
    for (const gatewayId of ["", "has space", "x".repeat(65), "-leading-dash"]) {
      const g = new FakeGateway(t.relay.grpcAddress, keys["e"]);
      g.write({ frame: { $case: "hello", value: { connection: "e", gateway_id: gatewayId, version: "t" } } });
      const end = await g.ended;
      expect(end.error).toMatchObject({ reason: "invalid_params", data: { field: "gateway_id" } });
      expect(end.error?.message).toContain("gateway's id");
      await g.close();
    }
    expect(t.relay.roster.epoch).toBe(epoch);
    expect(t.relay.sessions.get("e")).toBeUndefined();
  });

  it("the first frame must be hello", async () => {
    const g = new FakeGateway(t.relay.grpcAddress, keys["a"]);
    g.announce([{ handle: "alice" }]);
    const end = await g.ended;
    expect(end.error?.reason).toBe("invalid_params");
    expect(end.error?.message).toContain("first frame must be hello");
    await g.close();
  });
});

describe("roster propagation", () => {
  it("tells every gateway about the bots on the others, with an epoch rising on appear, rename, disappear", async () => {
    const a = await gw("a");
    a.announce([{ handle: "alice", title: "Researcher" }]);
    const b = await gw("b");
    const first = await b.next("roster", (r) => r.bots.some((x) => x.bot?.handle === "alice"));
    expect(first.bots).toContainEqual({
      connection: "a",
      bot: { handle: "alice", display_name: "alice", title: "Researcher", description: "" },
      online: true,
      gateway_id: "gw-a",
    });
    expect(first.bots.some((x) => x.connection === "b")).toBe(false);

    const epochs: number[] = [first.epoch];
    const after = () => epochs[epochs.length - 1]!;
    b.announce([{ handle: "bob" }]);
    epochs.push((await a.next("roster", (r) => r.epoch > after() && r.bots.some((x) => x.bot?.handle === "bob"))).epoch);
    b.announce([{ handle: "robert" }]); // rename
    const renamed = await a.next("roster", (r) => r.epoch > after() && r.bots.some((x) => x.bot?.handle === "robert"));
    expect(renamed.bots.some((x) => x.bot?.handle === "bob")).toBe(false);
    epochs.push(renamed.epoch);
    b.announce([]); // disappear
    const gone = await a.next("roster", (r) => r.epoch > after() && !r.bots.some((x) => x.connection === "b" && x.bot?.handle));
    epochs.push(gone.epoch);
    expect([...epochs].sort((x, y) => x - y)).toEqual(epochs);
    expect(new Set(epochs).size).toBe(epochs.length);

    // Going offline is a change too; the bots stay listed as offline (mail to them is queued).
    b.announce([{ handle: "bob" }]);
    await a.next("roster", (r) => r.bots.some((x) => x.bot?.handle === "bob" && x.online));
    await b.close();
    const offline = await a.next("roster", (r) => r.bots.some((x) => x.bot?.handle === "bob" && !x.online));
    expect(offline.epoch).toBeGreaterThan(gone.epoch);
  });

  it("carries each connection's gateway id, also when the connection is named otherwise, while it is offline too", async () => {
    const vps = await gw("d", keys["d"], "gw-469bc200");
    vps.announce([{ handle: "nora" }]);
    const b = await gw("b");
    const view = await b.next("roster", (r) => r.bots.some((x) => x.bot?.handle === "nora"));
    expect(view.bots.find((x) => x.bot?.handle === "nora")).toMatchObject({ connection: "d", gateway_id: "gw-469bc200", online: true });
    await vps.close();
    const offline = await b.next("roster", (r) => r.bots.some((x) => x.bot?.handle === "nora" && !x.online));
    expect(offline.bots.find((x) => x.bot?.handle === "nora")).toMatchObject({ connection: "d", gateway_id: "gw-469bc200" });
    // The key now serves another gateway: that is a roster change, and the new id is what others see.
    const moved = await gw("d", keys["d"], "gw-moved");
    const after = await b.next("roster", (r) => r.epoch > offline.epoch && r.bots.some((x) => x.bot?.handle === "nora" && x.online));
    expect(after.bots.find((x) => x.bot?.handle === "nora")).toMatchObject({ gateway_id: "gw-moved" });
    moved.announce([]);
    await b.next("roster", (r) => !r.bots.some((x) => x.connection === "d"));
  });

  it("keeps the roster and a never-falling epoch across a restart", async () => {
    const a = await gw("a");
    a.announce([{ handle: "alice" }]);
    await a.next("roster", () => true);
    const before = t.relay.roster.epoch;
    await a.close();
    open.length = 0;
    await t.restart();
    expect(t.relay.roster.epoch).toBeGreaterThanOrEqual(before);
    const b = await gw("b");
    const view = await b.next("roster");
    expect(view.epoch).toBeGreaterThanOrEqual(before);
    expect(view.bots).toContainEqual(
      expect.objectContaining({ connection: "a", online: false, gateway_id: "gw-a", bot: expect.objectContaining({ handle: "alice" }) }),
    );
  });
});

describe("deliveries", () => {
  it("acks queued after commit, forwards to the target, relays the receipt back", async () => {
    const a = await gw("a");
    const b = await gw("b");
    const env = envelope(A, "bob@b", "hello bob");
    a.send(env, { connection: "b", handle: "bob" }, "Alice");
    expect(await a.next("ack", (x) => x.delivery_id === env.delivery_id)).toMatchObject({ status: "queued" });
    expect(t.relay.store.delivery(env.delivery_id)).toMatchObject({ state: "queued", sender_connection: "a" });
    const deliver = await b.next("deliver", (d) => d.envelope?.delivery_id === env.delivery_id);
    expect(deliver).toMatchObject({ target_profile: "bob", sender_name: "Alice", from_connection: "a", envelope: env });
    b.answer(env.delivery_id, { state: "settled", reply: "hi alice" });
    const outcome = await a.next("outcome", (o) => o.delivery_id === env.delivery_id);
    expect(outcome.result).toMatchObject({ $case: "receipt", value: { state: "settled", reply: "hi alice" } });
    expect(t.relay.store.delivery(env.delivery_id)).toMatchObject({ state: "done" });
  });

  it("same target strictly in order, one at a time; another target in parallel", async () => {
    const a = await gw("a");
    const b = await gw("b");
    const envs = Array.from({ length: 12 }, (_, i) => envelope(A, "bob@b", `m${i}`));
    for (const e of envs) a.send(e, { connection: "b", handle: "bob" });
    const other = envelope(A, "bea@b", "to bea");
    a.send(other, { connection: "b", handle: "bea" });
    // bea's mail is not held behind bob's: it is forwarded while bob's first is unanswered.
    await b.next("deliver", (x) => x.envelope?.delivery_id === other.delivery_id);
    for (const e of envs) await a.next("ack", (x) => x.delivery_id === e.delivery_id);
    const inFlightBefore = t.relay.broker.depth().in_flight;
    const order: string[] = [];
    for (let i = 0; i < envs.length; i++) {
      const d = await b.next("deliver", (x) => x.envelope?.target === "bob@b");
      order.push(d.envelope!.message);
      // Nothing else for bob is forwarded while this one is unanswered: the relay has this one and
      // bea's in flight, no more (a forward is counted before its frame is written).
      expect(t.relay.broker.depth().in_flight).toBe(inFlightBefore);
      expect(b.all("deliver").filter((x) => x.envelope?.target === "bob@b")).toHaveLength(order.length);
      b.answer(d.envelope!.delivery_id, { state: "settled", reply: `re ${d.envelope!.message}` });
    }
    expect(order).toEqual(envs.map((e) => e.message));
    b.answer(other.delivery_id, { state: "settled", reply: "ok" });
    for (const e of envs) await a.next("outcome", (o) => o.delivery_id === e.delivery_id);
  });

  it("holds mail for an offline target and forwards it when the target connects", async () => {
    const a = await gw("a");
    const env = envelope(A, "carol@c", "while you were out");
    a.send(env, { connection: "c", handle: "carol" });
    await a.next("ack", (x) => x.delivery_id === env.delivery_id);
    expect(t.relay.store.delivery(env.delivery_id)).toMatchObject({ state: "queued" });
    const c = await gw("c");
    await c.next("deliver", (d) => d.envelope?.delivery_id === env.delivery_id);
    c.answer(env.delivery_id, { state: "settled", reply: "back" });
    await a.next("outcome", (o) => o.delivery_id === env.delivery_id);
  });

  it("target disconnect mid-delivery → runtime_offline to the sender; its retry is queued again", async () => {
    const a = await gw("a");
    const d = await gw("d");
    const env = envelope(A, "dan@d", "are you there");
    a.send(env, { connection: "d", handle: "dan" });
    await d.next("deliver", (x) => x.envelope?.delivery_id === env.delivery_id);
    d.kill();
    const outcome = await a.next("outcome", (o) => o.delivery_id === env.delivery_id);
    expect(outcome.result).toMatchObject({ $case: "error", value: { reason: "runtime_offline" } });
    expect(t.relay.store.delivery(env.delivery_id)).toMatchObject({ state: "offline" });
    // The sender's single retry: the same envelope again.
    a.send(env, { connection: "d", handle: "dan" });
    await a.next("ack", (x) => x.delivery_id === env.delivery_id && x.status === "queued");
    const d2 = await gw("d");
    await d2.next("deliver", (x) => x.envelope?.delivery_id === env.delivery_id);
    d2.answer(env.delivery_id, { state: "settled", reply: "yes" });
    const second = await a.next("outcome", (o) => o.delivery_id === env.delivery_id);
    expect(second.result).toMatchObject({ $case: "receipt", value: { state: "settled" } });
  });

  it("expires mail whose target does not take it within the TTL (queued_expired)", async () => {
    const a = await gw("a");
    const env = envelope(A, "eve@e", "soon stale", { ttl_seconds: 1 });
    a.send(env, { connection: "e", handle: "eve" });
    await a.next("ack", (x) => x.delivery_id === env.delivery_id);
    const outcome = await a.next("outcome", (o) => o.delivery_id === env.delivery_id, 5000);
    expect(outcome.result).toMatchObject({ $case: "receipt", value: { state: "expired", reason: "queued_expired", attempts: 0 } });
    // The target coming back later never sees it: a later envelope to eve, in the same lane in
    // commit order, is forwarded first.
    const e = await gw("e");
    const later = envelope(A, "eve@e", "still fresh");
    a.send(later, { connection: "e", handle: "eve" });
    await e.next("deliver", (x) => x.envelope?.delivery_id === later.delivery_id);
    expect(e.all("deliver").some((x) => x.envelope?.delivery_id === env.delivery_id)).toBe(false);
    e.answer(later.delivery_id, { state: "settled", reply: "ok" });
    await a.next("outcome", (o) => o.delivery_id === later.delivery_id);
  });

  it("a repeat of an ended delivery is answered with the stored outcome; another payload is idempotency_conflict", async () => {
    const a = await gw("a");
    const b = await gw("b");
    const env = envelope(A, "bob@b", "once");
    a.send(env, { connection: "b", handle: "bob" });
    await b.next("deliver", (x) => x.envelope?.delivery_id === env.delivery_id);
    b.answer(env.delivery_id, { state: "settled", reply: "done once" });
    await a.next("outcome", (o) => o.delivery_id === env.delivery_id);

    a.send(env, { connection: "b", handle: "bob" });
    await a.next("ack", (x) => x.delivery_id === env.delivery_id && x.status === "queued");
    const again = await a.next("outcome", (o) => o.delivery_id === env.delivery_id);
    expect(again.result).toMatchObject({ $case: "receipt", value: { reply: "done once" } });

    a.send({ ...env, message: "twice?" }, { connection: "b", handle: "bob" });
    const refused = await a.next("ack", (x) => x.delivery_id === env.delivery_id && x.status === "");
    expect(refused.error).toMatchObject({ reason: "idempotency_conflict" });
    // Neither copy was forwarded again: a later envelope to bob, in the same lane in commit order, is forwarded first.
    const later = envelope(A, "bob@b", "after the copies");
    a.send(later, { connection: "b", handle: "bob" });
    await b.next("deliver", (x) => x.envelope?.delivery_id === later.delivery_id);
    expect(b.all("deliver").filter((x) => x.envelope?.delivery_id === env.delivery_id)).toHaveLength(1);
    b.answer(later.delivery_id, { state: "settled", reply: "ok" });
    await a.next("outcome", (o) => o.delivery_id === later.delivery_id);
  });
});

describe("group commit", () => {
  it("a repeat and a conflicting copy in the same batch see the first copy: one stored, one forwarded", async () => {
    const a = await gw("a");
    const b = await gw("b");
    const env = envelope(A, "bob@b", "same batch");
    a.send(env, { connection: "b", handle: "bob" });
    a.send(env, { connection: "b", handle: "bob" });
    a.send({ ...env, message: "changed" }, { connection: "b", handle: "bob" });
    const acks = [
      await a.next("ack", (x) => x.delivery_id === env.delivery_id),
      await a.next("ack", (x) => x.delivery_id === env.delivery_id),
      await a.next("ack", (x) => x.delivery_id === env.delivery_id),
    ];
    expect(acks.filter((x) => x.status === "queued")).toHaveLength(2);
    expect(acks.filter((x) => x.error?.reason === "idempotency_conflict")).toHaveLength(1);
    await b.next("deliver", (x) => x.envelope?.delivery_id === env.delivery_id);
    b.answer(env.delivery_id, { state: "settled", reply: "once" });
    await a.next("outcome", (o) => o.delivery_id === env.delivery_id);
    expect(b.all("deliver").filter((x) => x.envelope?.delivery_id === env.delivery_id)).toHaveLength(1);
    expect(t.relay.store.delivery(env.delivery_id)?.envelope.message).toBe("same batch");
  });
});

describe("bad input", () => {
  it("garbage, empty and out-of-place frames get typed error frames; the stream keeps working", async () => {
    const a = await gw("a");
    const b = await gw("b");
    a.write(Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f, 0x42]));
    expect(await a.next("error", (e) => e.frame === "garbage")).toMatchObject({ error: { reason: "invalid_params" } });
    a.write(Buffer.alloc(0));
    expect(await a.next("error", (e) => e.frame === "empty")).toMatchObject({ error: { reason: "invalid_params" } });
    a.write({ frame: { $case: "hello", value: { connection: "a", gateway_id: "x", version: "t" } } });
    await a.next("error", (e) => e.frame === "hello");
    a.write({ frame: { $case: "result", value: { delivery_id: "", result: undefined } } });
    await a.next("error", (e) => e.frame === "result");
    a.answer("dlv_never_forwarded", { state: "settled" }); // not in flight here: ignored
    a.announce([{ handle: "Not A Handle" }]);
    expect(await a.next("error", (e) => e.frame === "roster")).toMatchObject({ error: { reason: "invalid_params" } });
    // Still serving: a delivery goes through.
    const env = envelope(A, "bob@b", "after the garbage");
    a.send(env, { connection: "b", handle: "bob" });
    await b.next("deliver", (x) => x.envelope?.delivery_id === env.delivery_id);
    b.answer(env.delivery_id, { state: "settled", reply: "fine" });
    await a.next("outcome", (o) => o.delivery_id === env.delivery_id);
  });

  it("refuses oversized, malformed and unroutable sends in their ack; nothing is stored", async () => {
    const a = await gw("a");
    const cases = [
      { env: envelope(A, "bob@b", "x".repeat(16_001)), target: { connection: "b", handle: "bob" }, reason: "payload_too_large" },
      { env: envelope(A, "bob@b", "x".repeat(200_000)), target: { connection: "b", handle: "bob" }, reason: "payload_too_large" },
      { env: envelope(A, "bob@b", "hi", { ttl_seconds: 0 }), target: { connection: "b", handle: "bob" }, reason: "invalid_params" },
      { env: envelope(A, "bob@B!", "hi"), target: { connection: "B!", handle: "bob" }, reason: "invalid_params" },
      { env: envelope(A, "zed@nowhere", "hi"), target: { connection: "nowhere", handle: "zed" }, reason: "unknown_target" },
    ];
    for (const c of cases) {
      a.send(c.env, c.target);
      const ack = await a.next("ack", (x) => x.delivery_id === c.env.delivery_id);
      expect(ack).toMatchObject({ status: "", error: { reason: c.reason } });
      expect(t.relay.store.delivery(c.env.delivery_id)).toBeUndefined();
    }
  });

  it("a frame over the stream limit ends only that stream; the relay keeps serving the others", async () => {
    const a = await gw("a");
    const b = await gw("b");
    const c = await gw("c");
    c.write(Buffer.alloc(9 * 1024 * 1024, 1));
    const end = await c.ended;
    expect(end.error).toBeDefined();
    const env = envelope(A, "bob@b", "still here?");
    a.send(env, { connection: "b", handle: "bob" });
    await b.next("deliver", (x) => x.envelope?.delivery_id === env.delivery_id);
    b.answer(env.delivery_id, { state: "settled", reply: "yes" });
    await a.next("outcome", (o) => o.delivery_id === env.delivery_id);
  });
});

describe("restart", () => {
  it("loses nothing: queued and in-flight envelopes are forwarded again after a restart", async () => {
    const a = await gw("a");
    const b = await gw("b");
    const inFlight = envelope(A, "bob@b", "in flight at the restart");
    const queuedBehind = envelope(A, "bob@b", "queued behind it");
    a.send(inFlight, { connection: "b", handle: "bob" });
    a.send(queuedBehind, { connection: "b", handle: "bob" });
    await b.next("deliver", (x) => x.envelope?.delivery_id === inFlight.delivery_id);
    await a.next("ack", (x) => x.delivery_id === queuedBehind.delivery_id);
    open.length = 0;
    await t.restart();
    await Promise.all([a.ended, b.ended]);
    await a.close();
    await b.close();
    const a2 = await gw("a");
    const b2 = await gw("b");
    // The sender re-sends what it has not heard back about (the relay answers with an ack).
    a2.send(inFlight, { connection: "b", handle: "bob" });
    a2.send(queuedBehind, { connection: "b", handle: "bob" });
    const first = await b2.next("deliver");
    expect(first.envelope?.delivery_id).toBe(inFlight.delivery_id);
    b2.answer(inFlight.delivery_id, { state: "settled", reply: "1" });
    const second = await b2.next("deliver", (x) => x.envelope?.delivery_id === queuedBehind.delivery_id);
    b2.answer(second.envelope!.delivery_id, { state: "settled", reply: "2" });
    await a2.next("outcome", (o) => o.delivery_id === inFlight.delivery_id);
    await a2.next("outcome", (o) => o.delivery_id === queuedBehind.delivery_id);
  });

  it("a newer stream of the same connection replaces the old one and gets its in-flight mail again", async () => {
    const a = await gw("a");
    const b = await gw("b");
    const env = envelope(A, "bob@b", "handed over");
    a.send(env, { connection: "b", handle: "bob" });
    await b.next("deliver", (x) => x.envelope?.delivery_id === env.delivery_id);
    const b2 = await gw("b");
    expect((await b.ended).error?.reason).toBe("refused");
    await b2.next("deliver", (x) => x.envelope?.delivery_id === env.delivery_id);
    b2.answer(env.delivery_id, { state: "settled", reply: "got it" });
    const outcome = await a.next("outcome", (o) => o.delivery_id === env.delivery_id);
    expect(outcome.result).toMatchObject({ $case: "receipt" });
    expect(a.all("outcome").filter((o) => o.delivery_id === env.delivery_id)).toHaveLength(1);
  });
});

describe("tunnel", () => {
  function tunnelClient(): RelayServiceClient {
    return new RelayServiceClient(t.relay.grpcAddress, credentials.createInsecure());
  }

  function serve(g: FakeGateway, answer: (method: string, params: unknown, stream: boolean, callId: string) => void): void {
    const seen = new Set<string>();
    const loop = () => {
      for (const call of g.all("tunnel_call")) {
        if (seen.has(call.call_id)) continue;
        seen.add(call.call_id);
        answer(call.method, JSON.parse(call.params_json), call.stream, call.call_id);
      }
    };
    const timer = setInterval(loop, 5);
    g.ended.then(() => clearInterval(timer));
    timer.unref();
  }

  it("carries a unary call and a stream to a connected gateway and back", async () => {
    const b = await gw("b");
    serve(b, (method, params, stream, callId) => {
      const p = params as { room_id: string };
      if (!stream) {
        b.write({
          frame: {
            $case: "tunnel_answer",
            value: {
              call_id: callId,
              result_json: JSON.stringify({ method, room: p.room_id, events: [1, 2] }),
              error: undefined,
              end: true,
            },
          },
        });
        return;
      }
      for (const seq of [1, 2, 3])
        b.write({
          frame: { $case: "tunnel_answer", value: { call_id: callId, result_json: JSON.stringify({ seq }), error: undefined, end: false } },
        });
      b.write({ frame: { $case: "tunnel_answer", value: { call_id: callId, result_json: "", error: undefined, end: true } } });
    });
    const client = tunnelClient();
    try {
      const reply = await unaryCall<TunnelReply>((cb) =>
        client.tunnel(
          { connection: "b", method: "groups.log", params_json: JSON.stringify({ room_id: "r1" }) },
          authMetadata(keys["a"]),
          cb,
        ),
      );
      expect(JSON.parse(reply.result_json)).toEqual({ method: "groups.log", room: "r1", events: [1, 2] });
      const items: unknown[] = [];
      await new Promise<void>((resolve, reject) => {
        const s = client.tunnelStream({ connection: "b", method: "groups.subscribe", params_json: "{}" }, authMetadata(keys["a"]));
        s.on("data", (r: TunnelReply) => items.push(JSON.parse(r.result_json)));
        s.on("end", () => resolve());
        s.on("error", reject);
      });
      expect(items).toEqual([{ seq: 1 }, { seq: 2 }, { seq: 3 }]);
    } finally {
      client.close();
    }
  });

  it("passes the target's typed error through; an offline target or a bad key is refused", async () => {
    const b = await gw("b");
    serve(b, (_m, _p, _s, callId) =>
      b.write({
        frame: {
          $case: "tunnel_answer",
          value: { call_id: callId, result_json: "", error: { reason: "not_found", message: "no room r9", data_json: "" }, end: true },
        },
      }),
    );
    const client = tunnelClient();
    const call = (connection: string, key: string | undefined) =>
      unaryCall<TunnelReply>((cb) => client.tunnel({ connection, method: "groups.log", params_json: "{}" }, authMetadata(key), cb)).then(
        () => undefined,
        (err: HermesError) => err,
      );
    try {
      expect(await call("b", keys["a"])).toMatchObject({ reason: "not_found", message: "no room r9" });
      expect((await call("c", keys["a"]))?.reason).toBe("unavailable");
      expect((await call("b", "hrk_wrong"))?.reason).toBe("unauthenticated");
      const bad = await unaryCall<TunnelReply>((cb) =>
        client.tunnel({ connection: "b", method: "rm -rf", params_json: "{}" }, authMetadata(keys["a"]), cb),
      ).catch((err: HermesError) => err);
      expect((bad as HermesError).reason).toBe("invalid_params");
    } finally {
      client.close();
    }
  });
});

describe("revocation", () => {
  it("revoking a key disconnects the connection, removes its bots, and refuses it afterwards", async () => {
    const extra = t.relay.keys.add("doomed");
    const a = await gw("a");
    const doomed = await FakeGateway.connect(t.relay.grpcAddress, extra.key, "doomed");
    open.push(doomed);
    doomed.announce([{ handle: "ghost" }]);
    await a.next("roster", (r) => r.bots.some((x) => x.connection === "doomed"));
    expect(t.relay.revokeKey("doomed")).toEqual({ connection: "doomed", disconnected: true });
    expect((await doomed.ended).error?.reason).toBe("unauthenticated");
    await a.next("roster", (r) => !r.bots.some((x) => x.connection === "doomed"));
    const again = new FakeGateway(t.relay.grpcAddress, extra.key);
    again.write({ frame: { $case: "hello", value: { connection: "doomed", gateway_id: "x", version: "t" } } });
    expect((await again.ended).error?.reason).toBe("unauthenticated");
    await again.close();
    expect(() => t.relay.revokeKey("doomed")).toThrow(expect.objectContaining({ reason: "not_found" }));
  });
});
