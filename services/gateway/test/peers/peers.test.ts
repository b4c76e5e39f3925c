import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { botChat, createBot, writeHomeConfig, writeHomeEnv } from "../support/delivery-fixtures.js";
import { type GatedProvider, startGatedProvider } from "../support/gated-provider.js";
import { startTestGateway, type TestGateway } from "../support/gateway-harness.js";
import { failure, message, peerClient, runCount, withPeer } from "../support/peers-fixtures.js";

/**
 * Direct peers between two real gateways over real gRPC with keys. A (the caller) has B
 * registered as peer `b` (bot_peers.b.url in A's config.yaml, HERMES_PEER_B_KEY in A's .env) plus
 * peers with a wrong key, no key and no listener. B hosts `bob` (the local provider) and `slow`
 * (an OpenAI-compatible endpoint whose answers the test releases by hand).
 */

const KEY_A = "key-a-0123456789abcdef";
const KEY_B = "key-b-0123456789abcdef";
let a: TestGateway;
let b: TestGateway;
let gated: GatedProvider;
let homeA: string;

beforeAll(async () => {
  gated = await startGatedProvider();
  const homeB = mkdtempSync(join(tmpdir(), "hpeer-b-"));
  writeHomeConfig(homeB, { providers: { gated: { base_url: gated.url, api_key_env: "GATED_KEY" } } });
  writeHomeEnv(homeB, { GATED_KEY: "sk-gated-000" });
  b = await startTestGateway({ home: homeB, key: KEY_B });
  createBot(b, "bob", { title: "Remote reviewer" });
  createBot(b, "slow", { provider: "gated", model: "gated-model" });
  homeA = mkdtempSync(join(tmpdir(), "hpeer-a-"));
  writeHomeConfig(homeA, {
    bot_peers: {
      b: { url: `grpc://${b.gateway.grpcAddress}`, note: "the other box" },
      bwrong: { url: `grpc://${b.gateway.grpcAddress}` },
      nokey: { url: `grpc://${b.gateway.grpcAddress}` },
      dead: { url: "grpc://127.0.0.1:1" },
    },
  });
  writeHomeEnv(homeA, {
    HERMES_PEER_B_KEY: KEY_B,
    HERMES_PEER_BWRONG_KEY: "not-the-key-of-b-000",
    HERMES_PEER_DEAD_KEY: "whatever-key-000",
  });
  a = await startTestGateway({ home: homeA, key: KEY_A });
}, 60_000);

afterAll(async () => {
  await a?.destroy();
  await b?.destroy();
  await gated?.close();
});

afterEach(() => {
  // Every test releases what it held, so the next one starts with an idle endpoint.
  expect(gated.held()).toBe(0);
});

const sender = () => ({ profile: "alice", gateway: a.gateway.id, name: "Alice" });

describe("peer dm", () => {
  it("runs one turn in the remote profile's canonical Bot Chat and answers with the reply, attributed to the sender", async () => {
    const text = 'review `this` and $(whoami) "verbatim"\nsecond line';
    const reply = await withPeer(homeA, "b", (c) => c.dm(message(text, "bob", {}, sender()), 30));
    expect(reply.replayed).toBe(false);
    expect(reply.run).toMatchObject({ status: "completed", kind: "dm", profile: "bob", from: `alice@${a.gateway.id}` });
    expect(reply.run!.reply).toContain("Hi Alice, bob (Remote reviewer) here.");
    const chat = botChat(b, "bob");
    expect(chat.at(-2)).toMatchObject({
      role: "user",
      content: `Message from 🤖 Alice (@alice@${a.gateway.id}): ${text}`,
      meta: { run_id: reply.run!.run_id, from: `alice@${a.gateway.id}` },
    });
    expect(chat.at(-1)).toMatchObject({ role: "assistant", content: reply.run!.reply });
    expect(chat.at(-2)!.meta["run_id"]).toBe(reply.run!.run_id);
    // It ran in bob's canonical Bot Chat, the one session the peer's bots message.
    expect(reply.run!.session_id).toBe(b.gateway.sessions.botChat("bob").session_id);
  });

  it("without a profile it is the peer's default bot", async () => {
    const reply = await withPeer(homeA, "b", (c) => c.dm(message("hello default", "", {}, sender()), 30));
    expect(reply.run).toMatchObject({ status: "completed", profile: "default" });
    expect(botChat(b, "default").at(-2)!.content).toMatch(/: hello default$/);
  });

  it("answers with the run still running when the wait runs out; the turn goes on", async () => {
    const reply = await withPeer(homeA, "b", (c) => c.dm(message("slow question", "slow", {}, sender()), 1));
    expect(reply.run!.status).toBe("running");
    await eventually(() => expect(gated.held()).toBe(1));
    gated.release("the slow answer");
    const done = await withPeer(homeA, "b", (c) => c.getRun(reply.run!.run_id, 10));
    expect(done).toMatchObject({ status: "completed", reply: "the slow answer" });
  });

  it("an unknown profile on the peer is unknown_target (exit 2) naming its bots; nothing runs", async () => {
    const before = runCount(b);
    const e = await failure(withPeer(homeA, "b", (c) => c.dm(message("anyone?", "zed", {}, sender()), 10)));
    expect(e).toMatchObject({ reason: "unknown_target" });
    expect(e.exitCode).toBe(2);
    expect(e.message).toContain('no bot called "zed" on this gateway; it has: default, bob, slow');
    expect(runCount(b)).toBe(before);
  });

  it("refuses bad input with typed usage errors (exit 2)", async () => {
    await withPeer(homeA, "b", async (c) => {
      expect((await failure(c.dm(message("   ", "bob", {}, sender()), 5))).reason).toBe("invalid_params");
      expect((await failure(c.dm(message("x".repeat(64_001), "bob", {}, sender()), 5))).reason).toBe("payload_too_large");
      const badKey = await failure(c.startRun(message("x", "bob", { idempotency_key: "two\nlines" }, sender())));
      expect(badKey).toMatchObject({ reason: "invalid_params" });
      expect(badKey.message).toContain("CR, LF or NUL");
      expect((await failure(c.dm(message("x", "Bob", {}, sender()), 5))).reason).toBe("invalid_name");
      expect((await failure(c.dm(message("x", "bob", {}, { profile: "", gateway: "gw", name: "" }), 5))).reason).toBe("invalid_params");
      expect((await failure(c.dm(message("x", "bob", {}, sender()), 3601))).reason).toBe("invalid_params");
      expect((await failure(c.getRun(""))).reason).toBe("invalid_params");
      for (const e of await Promise.all([failure(c.getRun("run_nope")), failure(c.stopRun("run_nope"))])) {
        expect(e).toMatchObject({ reason: "not_found" });
        expect(e.exitCode).toBe(1);
      }
    });
  });
});

describe("peer run, status and stop", () => {
  it("returns the run id at once; status follows it to completed", async () => {
    await withPeer(homeA, "b", async (c) => {
      const started = Date.now();
      const { run, replayed } = await c.startRun(message("a long task", "slow", {}, sender()));
      expect(Date.now() - started).toBeLessThan(2000);
      expect(replayed).toBe(false);
      expect(run).toMatchObject({ kind: "run", profile: "slow", from: `alice@${a.gateway.id}` });
      expect(["queued", "running"]).toContain(run!.status);
      await eventually(() => expect(gated.held()).toBe(1));
      const running = await c.getRun(run!.run_id);
      expect(running.status).toBe("running");
      expect(running.started_at).toBeTruthy();
      expect(running.reply).toBeUndefined();
      gated.release("task done");
      const done = await c.getRun(run!.run_id, 10);
      expect(done).toMatchObject({ status: "completed", reply: "task done" });
      expect(done.ended_at).toBeTruthy();
    });
  });

  it("stop cancels a running turn, and a queued run never starts", async () => {
    await withPeer(homeA, "b", async (c) => {
      const prompts = gated.prompts.length;
      const first = (await c.startRun(message("first long job", "slow", {}, sender()))).run!;
      await eventually(() => expect(gated.held()).toBe(1));
      // Same Bot Chat: the second waits in its lane behind the first.
      const second = (await c.startRun(message("second long job", "slow", {}, sender()))).run!;
      expect((await c.getRun(second.run_id)).status).toBe("queued");

      const stoppedQueued = await c.stopRun(second.run_id);
      expect(stoppedQueued).toMatchObject({ status: "cancelled", error: "stopped by the peer (hermes peer stop)" });
      expect(stoppedQueued.started_at).toBeUndefined();

      const stoppedRunning = await c.stopRun(first.run_id);
      expect(stoppedRunning).toMatchObject({ status: "cancelled" });
      expect(stoppedRunning.started_at).toBeTruthy();
      // The endpoint saw the first job only; the held request was abandoned by the cancel.
      await eventually(() => expect(gated.held()).toBe(0));
      expect(gated.prompts.slice(prompts).filter((p) => p.endsWith("long job"))).toEqual([expect.stringMatching(/first long job$/)]);
      // Stopping an ended run returns it unchanged.
      expect(await c.stopRun(first.run_id)).toMatchObject({ status: "cancelled", ended_at: stoppedRunning.ended_at });
      // The Bot Chat is free again: the next run completes.
      const next = (await c.startRun(message("third job", "slow", {}, sender()))).run!;
      await eventually(() => expect(gated.held()).toBe(1));
      gated.release("third done");
      expect(await c.getRun(next.run_id, 10)).toMatchObject({ status: "completed", reply: "third done" });
    });
  });

  it("a failed turn carries its delivery reason", async () => {
    createBot(b, "broken", { provider: "nowhere", model: "m" });
    const reply = await withPeer(homeA, "b", (c) => c.dm(message("hi", "broken", {}, sender()), 10));
    expect(reply.run).toMatchObject({ status: "failed", reason: "missing_config" });
    expect(reply.run!.error).toBeTruthy();
  });
});

describe("idempotency", () => {
  it("same key and input return the original run (replayed); another input is a conflict (exit 2); nothing runs twice", async () => {
    await withPeer(homeA, "b", async (c) => {
      const key = "ticket-123";
      const first = await c.startRun(message("triage ticket 123", "bob", { idempotency_key: key }, sender()));
      expect(first).toMatchObject({ replayed: false, run: { idempotency_key: key } });
      const done = await c.getRun(first.run!.run_id, 10);
      expect(done.status).toBe("completed");

      const again = await c.startRun(message("triage ticket 123", "bob", { idempotency_key: key }, sender()));
      expect(again.replayed).toBe(true);
      expect(again.run).toEqual(done);
      // A dm with the same key and input is the same work too: the original reply, nothing new run.
      const viaDm = await c.dm(message("triage ticket 123", "bob", { idempotency_key: key }, sender()), 10);
      expect(viaDm).toMatchObject({ replayed: true, run: { run_id: done.run_id, reply: done.reply } });
      expect(botChat(b, "bob").filter((m) => m.content.endsWith(": triage ticket 123"))).toHaveLength(1);

      const conflict = await failure(c.startRun(message("something else", "bob", { idempotency_key: key }, sender())));
      expect(conflict).toMatchObject({ reason: "idempotency_conflict", data: { run_id: done.run_id } });
      expect(conflict.exitCode).toBe(2);
      const otherTarget = await failure(c.startRun(message("triage ticket 123", "default", { idempotency_key: key }, sender())));
      expect(otherTarget.reason).toBe("idempotency_conflict");

      // Keys belong to their sender: another bot may use the same key for its own work.
      const other = await c.startRun(message("triage ticket 123", "bob", { idempotency_key: key }, { ...sender(), profile: "carol" }));
      expect(other.replayed).toBe(false);
      expect(other.run!.run_id).not.toBe(done.run_id);
      await c.getRun(other.run!.run_id, 10);
    });
  });

  it("a retry while the original is still running joins it instead of starting a second turn", async () => {
    await withPeer(homeA, "b", async (c) => {
      const prompts = gated.prompts.length;
      const first = await c.startRun(message("only once please", "slow", { idempotency_key: "once" }, sender()));
      await eventually(() => expect(gated.held()).toBe(1));
      const retry = await c.startRun(message("only once please", "slow", { idempotency_key: "once" }, sender()));
      expect(retry).toMatchObject({ replayed: true, run: { run_id: first.run!.run_id, status: "running" } });
      gated.release("did it once");
      expect(await c.getRun(first.run!.run_id, 10)).toMatchObject({ status: "completed", reply: "did it once" });
      expect(gated.prompts.slice(prompts).filter((p) => p.endsWith("only once please"))).toHaveLength(1);
    });
  });

  it("without a key the same input is new work each time", async () => {
    await withPeer(homeA, "b", async (c) => {
      const x = await c.startRun(message("no key", "bob", {}, sender()));
      const y = await c.startRun(message("no key", "bob", {}, sender()));
      expect(x.run!.run_id).not.toBe(y.run!.run_id);
      expect(y.replayed).toBe(false);
      await c.getRun(y.run!.run_id, 10);
    });
  });
});

describe("peer lookup, keys and reachability", () => {
  it("a wrong key is refused (unauthenticated, naming the peer: the CLI exits 1) and nothing runs", async () => {
    const before = runCount(b);
    const turns = botChat(b, "bob").length;
    const e = await failure(withPeer(homeA, "bwrong", (c) => c.dm(message("let me in", "bob", {}, sender()), 5)));
    expect(e.reason).toBe("unauthenticated");
    expect(e.data["peer"]).toBe("bwrong");
    expect(e.message).toContain("HERMES_PEER_BWRONG_KEY");
    const run = await failure(withPeer(homeA, "bwrong", (c) => c.startRun(message("let me in", "bob", {}, sender()))));
    expect(run.reason).toBe("unauthenticated");
    expect(runCount(b)).toBe(before);
    expect(botChat(b, "bob")).toHaveLength(turns);
  });

  it("an unknown peer and a missing key are peer errors (missing_config, exit 1) naming what to set", async () => {
    const unknown = await failure(() => peerClient(homeA, "ghost"));
    expect(unknown).toMatchObject({ reason: "missing_config" });
    expect(unknown.exitCode).toBe(1);
    expect(unknown.message).toContain("unknown peer ghost: register it with hermes peer add ghost");
    const noKey = await failure(() => peerClient(homeA, "nokey"));
    expect(noKey).toMatchObject({ reason: "missing_config", data: { key_variable: "HERMES_PEER_NOKEY_KEY" } });
    expect(noKey.exitCode).toBe(1);
  });

  it("an unreachable peer is unavailable (exit 1)", async () => {
    const e = await failure(withPeer(homeA, "dead", (c) => c.dm(message("are you there?", "bob", {}, sender()), 5)));
    expect(e.reason).toBe("unavailable");
    expect(e.exitCode).toBe(1);
    expect(e.message).toContain("cannot reach peer dead (grpc://127.0.0.1:1)");
  });

  it("a gateway without an API key runs no turns for peers on its network port", async () => {
    const open = await startTestGateway({ key: "" });
    try {
      const home = mkdtempSync(join(tmpdir(), "hpeer-c-"));
      writeHomeConfig(home, { bot_peers: { open: { url: `grpc://${open.gateway.grpcAddress}` } } });
      writeHomeEnv(home, { HERMES_PEER_OPEN_KEY: "anything-at-all-00" });
      const e = await failure(withPeer(home, "open", (c) => c.dm(message("hi", "", {}, sender()), 5)));
      expect(e.reason).toBe("unauthenticated");
      expect(e.message).toContain("has no API key");
      expect(runCount(open)).toBe(0);
    } finally {
      await open.destroy();
    }
  });

  it("gateway status lists the registered peers with their URLs", () => {
    expect(a.gateway.status().peers).toEqual([
      { name: "b", url: `grpc://${b.gateway.grpcAddress}` },
      { name: "bwrong", url: `grpc://${b.gateway.grpcAddress}` },
      { name: "dead", url: "grpc://127.0.0.1:1" },
      { name: "nokey", url: `grpc://${b.gateway.grpcAddress}` },
    ]);
    expect(b.gateway.status().peers).toEqual([]);
  });

  it("runs follow a profile rename (identity registry)", async () => {
    createBot(b, "temp");
    const reply = await withPeer(homeA, "b", (c) => c.dm(message("before the rename", "temp", {}, sender()), 10));
    b.gateway.profiles.rename("temp", "temp2");
    const after = await withPeer(homeA, "b", (c) => c.getRun(reply.run!.run_id));
    expect(after.profile).toBe("temp2");
    // The former name still reaches the bot.
    const viaAlias = await withPeer(homeA, "b", (c) => c.dm(message("after the rename", "temp", {}, sender()), 10));
    expect(viaAlias.run).toMatchObject({ status: "completed", profile: "temp2" });
  });
});
