import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { HermesError } from "@hermes/common";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { startTestRelay, type TestRelay } from "../../../relay/test/support/relay-harness.js";
import { botChat, createBot, sendAndWait, writeHomeConfig, writeHomeEnv } from "../support/delivery-fixtures.js";
import { type GatedProvider, startGatedProvider } from "../support/gated-provider.js";
import { startTestGateway, type TestGateway } from "../support/gateway-harness.js";

/**
 * A relay and three real gateways (a, b, c) on 127.0.0.1, each dialling out to the relay with its
 * own connection key: roster propagation, `<handle>@<connection>` deliveries both ways, per-target
 * order under concurrency, a target gateway restart, TTL expiry, a target lost mid-turn, the
 * tunnel, and a gateway presenting another connection's key.
 */

let relay: TestRelay;
let gated: GatedProvider;
const keys: Record<string, string> = {};
const gateways: Record<string, TestGateway> = {};
const homes: Record<string, string> = {};

async function startGateway(name: string, key = keys[name]!): Promise<TestGateway> {
  homes[name] ??= mkdtempSync(join(tmpdir(), `hrm-${name}-`));
  const t = await startTestGateway({
    home: homes[name],
    overrides: { id: name, relayUrl: relay.url, relayKey: key },
  });
  gateways[name] = t;
  return t;
}

function link(t: TestGateway) {
  return t.gateway.relay!;
}

async function connected(t: TestGateway): Promise<void> {
  await eventually(() => expect(link(t).status().state).toBe("connected"));
}

beforeAll(async () => {
  gated = await startGatedProvider();
  relay = await startTestRelay();
  for (const c of ["a", "b", "c"]) keys[c] = relay.relay.keys.add(c).key;
  for (const name of ["a", "b", "c"]) {
    homes[name] = mkdtempSync(join(tmpdir(), `hrm-${name}-`));
    writeHomeConfig(homes[name], {
      gateway: { shutdown_grace_seconds: 1 },
      delivery: { retry_delay_seconds: 0, sweep_seconds: 0.2 },
      providers: { gated: { base_url: gated.url, api_key_env: "GATED_KEY" } },
    });
    writeHomeEnv(homes[name], { GATED_KEY: "sk-gated-000" });
  }
  const a = await startGateway("a");
  const b = await startGateway("b");
  const c = await startGateway("c");
  createBot(a, "alice", { title: "Researcher" });
  createBot(b, "bob", { title: "Reviewer" });
  createBot(b, "bea", { title: "Designer" });
  createBot(c, "carol", { title: "Writer" });
  createBot(c, "slowpoke", { title: "Thinks slowly", provider: "gated", model: "gated-model" });
  await Promise.all([a, b, c].map(connected));
});

afterAll(async () => {
  for (const t of Object.values(gateways)) await t.destroy().catch(() => undefined);
  await relay?.destroy();
  await gated?.close();
});

function remoteTargets(t: TestGateway): string[] {
  return link(t)
    .remoteRoster()
    .map((b) => `${b.handle}@${b.connection}`)
    .sort();
}

describe("roster propagation", () => {
  it("every gateway learns the bots on the others; the Bot Chat roster lists them as <handle>@<connection>", async () => {
    const a = gateways["a"]!;
    await eventually(() => expect(remoteTargets(a)).toEqual(expect.arrayContaining(["bob@b", "bea@b", "carol@c", "slowpoke@c"])));
    expect(remoteTargets(a).some((t) => t.endsWith("@a"))).toBe(false);
    await eventually(() => expect(remoteTargets(gateways["c"]!)).toEqual(expect.arrayContaining(["alice@a", "bob@b"])));
    const roster = a.gateway.deliveries.roster("alice");
    expect(roster).toContainEqual(expect.objectContaining({ target: "bob@b", title: "Reviewer" }));
    expect(a.gateway.status().relay).toMatchObject({ url: relay.url, connection: "a", state: "connected" });
    expect(a.gateway.status().relay?.roster_epoch).toBeGreaterThan(0);
  });

  it("appear, rename and disappear reach the other gateways with a rising capability epoch", async () => {
    const a = gateways["a"]!;
    const b = gateways["b"]!;
    const epochs = [link(a).status().roster_epoch];
    createBot(b, "dave", { title: "Ops" });
    await eventually(() => expect(remoteTargets(a)).toContain("dave@b"));
    epochs.push(link(a).status().roster_epoch);
    b.gateway.profiles.rename("dave", "david");
    await eventually(() => {
      expect(remoteTargets(a)).toContain("david@b");
      expect(remoteTargets(a)).not.toContain("dave@b");
    });
    epochs.push(link(a).status().roster_epoch);
    b.gateway.profiles.delete("david");
    await eventually(() => expect(remoteTargets(a)).not.toContain("david@b"));
    epochs.push(link(a).status().roster_epoch);
    for (let i = 1; i < epochs.length; i++) expect(epochs[i]).toBeGreaterThan(epochs[i - 1]!);
  });
});

describe("deliveries across connections", () => {
  it("alice@a → bob@b: queued at once, one turn on b, the reply back in alice's Bot Chat", async () => {
    const a = gateways["a"]!;
    const b = gateways["b"]!;
    const receipt = await sendAndWait(a, "alice", "bob@b", "please review section 2");
    expect(receipt).toMatchObject({ state: "settled", target: "bob@b", from: "alice@a", attempts: 1 });
    expect(receipt.reply).toContain("bob (Reviewer)");
    expect(b.gateway.deliveries.store.ingress(receipt.delivery_id)).toMatchObject({
      source: "relay",
      state: "settled",
      target_profile: "bob",
    });
    expect(botChat(b, "bob").some((m) => m.content === "Message from 🤖 alice (@alice@a): please review section 2")).toBe(true);
    await eventually(() => expect(botChat(a, "alice").at(-1)).toMatchObject({ role: "notification", content: receipt.reply }));
  });

  it("works in every direction, and a unique bare handle resolves to its connection", async () => {
    const c = gateways["c"]!;
    const toAlice = await sendAndWait(c, "carol", "alice@a", "hello from c");
    expect(toAlice).toMatchObject({ state: "settled", target: "alice@a" });
    const bare = await sendAndWait(c, "carol", "bea", "bare handle");
    expect(bare).toMatchObject({ state: "settled", target: "bea@b" });
  });

  it("an unknown handle on a known connection fails without a retry, naming the bots there", async () => {
    const a = gateways["a"]!;
    const err = await Promise.resolve()
      .then(() => a.gateway.deliveries.send("alice", "zed@b", "anyone?"))
      .catch((e: HermesError) => e);
    expect((err as HermesError).reason).toBe("unknown_target");
  });

  it("same target in order under concurrency: two senders, ten messages each, one turn at a time", async () => {
    const a = gateways["a"]!;
    const c = gateways["c"]!;
    const b = gateways["b"]!;
    const before = botChat(b, "bea").length;
    const acks = [];
    for (let i = 0; i < 10; i++) {
      acks.push(a.gateway.deliveries.send("alice", "bea@b", `a-${i}`));
      acks.push(c.gateway.deliveries.send("carol", "bea@b", `c-${i}`));
    }
    const receipts = await Promise.all(acks.map(async (ack, i) => (i % 2 === 0 ? a : c).gateway.deliveries.wait((await ack).delivery_id)));
    expect(receipts.every((r) => r.state === "settled")).toBe(true);
    const turns = botChat(b, "bea")
      .slice(before)
      .filter((m) => m.role === "user" || m.role === "assistant");
    // One turn at a time: user, assistant, user, assistant…
    expect(turns.map((m) => m.role)).toEqual(turns.map((_, i) => (i % 2 === 0 ? "user" : "assistant")));
    const texts = turns.filter((m) => m.role === "user").map((m) => m.content.replace(/^Message from .*?\): /, ""));
    expect(texts.filter((t) => t.startsWith("a-"))).toEqual(Array.from({ length: 10 }, (_, i) => `a-${i}`));
    expect(texts.filter((t) => t.startsWith("c-"))).toEqual(Array.from({ length: 10 }, (_, i) => `c-${i}`));
  });

  it("a repeated delivery id with the same payload runs one turn; another payload is idempotency_conflict", async () => {
    const a = gateways["a"]!;
    const b = gateways["b"]!;
    const id = `dlv_idem_${Date.now()}`;
    await a.gateway.deliveries.send("alice", "bob@b", "only once", { delivery_id: id });
    const first = await a.gateway.deliveries.wait(id);
    expect(await a.gateway.deliveries.send("alice", "bob@b", "only once", { delivery_id: id })).toEqual({
      status: "queued",
      delivery_id: id,
    });
    await expect(a.gateway.deliveries.send("alice", "bob@b", "something else", { delivery_id: id })).rejects.toThrow(
      expect.objectContaining({ reason: "idempotency_conflict" }),
    );
    expect(first.state).toBe("settled");
    expect(botChat(b, "bob").filter((m) => m.meta["delivery_id"] === id && m.role === "user")).toHaveLength(1);
  });
});

describe("target gateway down", () => {
  it("mail to a stopped gateway waits at the relay and is delivered when it restarts", async () => {
    const a = gateways["a"]!;
    await gateways["b"]!.stop();
    await eventually(() =>
      expect(
        link(a)
          .remoteRoster()
          .find((x) => x.handle === "bob")?.online,
      ).toBe(false),
    );
    // alice's Bot Chat roster marks bob as offline (mail to him waits at the relay).
    expect(a.gateway.deliveries.roster("alice")).toContainEqual(
      expect.objectContaining({ target: "bob@b", title: "Reviewer", where: "via the relay", offline: true }),
    );
    const ack = await a.gateway.deliveries.send("alice", "bob@b", "while you were down");
    // The relay holds it (committed there, nobody to forward it to), so it cannot have run.
    await eventually(() => expect(relay.relay.store.delivery(ack.delivery_id)).toMatchObject({ state: "queued" }));
    expect(a.gateway.deliveries.get(ack.delivery_id).state).not.toBe("settled");
    const b = await startGateway("b");
    await connected(b);
    const receipt = await a.gateway.deliveries.wait(ack.delivery_id);
    expect(receipt).toMatchObject({ state: "settled" });
    expect(botChat(b, "bob").some((m) => m.content.endsWith("while you were down"))).toBe(true);
  });

  it("mail not taken within its TTL expires with queued_expired, and never runs later", async () => {
    const a = gateways["a"]!;
    await gateways["b"]!.stop();
    const receipt = await sendAndWait(a, "alice", "bob@b", "too late", 1);
    expect(receipt).toMatchObject({ state: "expired", reason: "queued_expired" });
    await eventually(() => expect(botChat(a, "alice").at(-1)?.content).toMatch(/^Delivery to bob@b failed \[reason: queued_expired\]/));
    const b = await startGateway("b");
    await connected(b);
    // A later message to bob takes the same relay lane, in commit order: once it has run, the
    // expired one would have run before it.
    expect(await sendAndWait(a, "alice", "bob@b", "after the expiry")).toMatchObject({ state: "settled" });
    expect(botChat(b, "bob").some((m) => m.content.endsWith("after the expiry"))).toBe(true);
    expect(botChat(b, "bob").some((m) => m.content.endsWith("too late"))).toBe(false);
  });

  it("a target lost mid-turn: runtime_offline, the single retry, and the turn never runs twice", async () => {
    const a = gateways["a"]!;
    const c = gateways["c"]!;
    const before = gated.prompts.length;
    const ack = await a.gateway.deliveries.send("alice", "slowpoke@c", "think hard");
    await eventually(() => expect(gated.held()).toBe(1));
    // The gateway dies with the turn running (its stop gives the turn a short grace, then cancels it).
    await c.stop();
    const c2 = await startGateway("c");
    await connected(c2);
    const receipt = await a.gateway.deliveries.wait(ack.delivery_id);
    // The target marked the interrupted turn ambiguous, and the retry was answered from that record.
    expect(receipt.state).toBe("ambiguous");
    expect(receipt.attempts).toBe(2);
    expect(gated.prompts.slice(before).filter((p) => p.endsWith("think hard"))).toHaveLength(1);
    expect(c2.gateway.deliveries.store.ingress(ack.delivery_id)).toMatchObject({ state: "ambiguous" });
  });
});

describe("tunnel", () => {
  it("calls a method another gateway registered, through the relay, with typed errors", async () => {
    const a = gateways["a"]!;
    const b = gateways["b"]!;
    link(b).tunnelHandlers.register("test.echo", { kind: "unary", run: async (params, ctx) => ({ params, from: ctx.from_connection }) });
    link(b).tunnelHandlers.register("test.count", {
      kind: "stream",
      run: async (params, _ctx, emit) => {
        for (let i = 1; i <= Number(params["n"]); i++) emit({ i });
      },
    });
    expect(await link(a).tunnel.call("b", "test.echo", { x: 1 })).toEqual({ params: { x: 1 }, from: "a" });
    const items: unknown[] = [];
    for await (const item of link(a).tunnel.stream("b", "test.count", { n: 3 })) items.push(item);
    expect(items).toEqual([{ i: 1 }, { i: 2 }, { i: 3 }]);
    const missing = await link(a)
      .tunnel.call("b", "groups.nothing", {})
      .catch((e: HermesError) => e);
    expect((missing as HermesError).reason).toBe("method_not_found");
  });
});

describe("typed refusals from the relay reach the sender's receipt and Bot Chat", () => {
  const lastNotification = (t: TestGateway, profile: string) =>
    botChat(t, profile)
      .filter((m) => m.role === "notification")
      .at(-1)?.content;

  it("a delivery id another gateway already used is idempotency_conflict, not unknown; nothing runs", async () => {
    const a = gateways["a"]!;
    const b = gateways["b"]!;
    const c = gateways["c"]!;
    const id = `dlv_taken_${Date.now()}`;
    await a.gateway.deliveries.send("alice", "bob@b", "first use of this id", { delivery_id: id });
    expect(await a.gateway.deliveries.wait(id)).toMatchObject({ state: "settled" });
    // c has never seen the id, so its own outbox takes it; the relay holds it for a's mail and refuses.
    await c.gateway.deliveries.send("carol", "bob@b", "same id, other mail", { delivery_id: id });
    const receipt = await c.gateway.deliveries.wait(id);
    expect(receipt).toMatchObject({ state: "failed", reason: "idempotency_conflict", attempts: 1 });
    expect(receipt.error).toContain("already exists at the relay");
    await eventually(() => expect(lastNotification(c, "carol")).toMatch(/^Delivery to bob@b failed \[reason: idempotency_conflict\]: /));
    expect(botChat(b, "bob").some((m) => m.content.endsWith("same id, other mail"))).toBe(false);
  });

  it("a target whose connection the relay no longer knows is unknown_target, not unknown, and is not retried", async () => {
    const a = gateways["a"]!;
    keys["gone"] = relay.relay.keys.add("gone").key;
    const gone = await startGateway("gone");
    createBot(gone, "ghost", { title: "Soon gone" });
    await connected(gone);
    await eventually(() => expect(remoteTargets(a)).toContain("ghost@gone"));
    // The key is revoked and, in the same tick, alice writes to ghost@gone: her gateway's roster
    // still lists it (the relay's roster update has not arrived), so the send is only refused at the relay.
    relay.relay.revokeKey("gone");
    const ack = await a.gateway.deliveries.send("alice", "ghost@gone", "are you still there?");
    const receipt = await a.gateway.deliveries.wait(ack.delivery_id);
    expect(receipt).toMatchObject({ state: "failed", reason: "unknown_target", attempts: 1 });
    expect(receipt.error).toContain('no connection called "gone" is known to the relay');
    await eventually(() => expect(lastNotification(a, "alice")).toMatch(/^Delivery to ghost@gone failed \[reason: unknown_target\]: /));
    await eventually(() => expect(remoteTargets(a)).not.toContain("ghost@gone"));
    await gone.destroy();
    delete gateways["gone"];
  });
});

describe("keys", () => {
  it("a gateway presenting another connection's key is refused; the real one keeps working", async () => {
    const intruder = await startGateway("intruder", keys["a"]!);
    await eventually(() => expect(link(intruder).status().state).toBe("refused"));
    expect(link(intruder).client.error).toContain("this key belongs to connection a");
    const receipt = await sendAndWait(gateways["c"]!, "carol", "alice@a", "still you?");
    expect(receipt.state).toBe("settled");
    // Its own sends fail at once with a clear reason instead of waiting for a TTL.
    const failed = await sendAndWait(intruder, "default", "alice@a", "let me in").catch((e: HermesError) => e);
    expect(failed).toMatchObject({ reason: expect.stringMatching(/runtime_offline|unknown_target/) });
    await intruder.destroy();
  });
});
