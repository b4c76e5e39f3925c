import type { HermesError } from "@hermes/common";
import { DeliveryServiceClient } from "@hermes/proto/hermes/v1/delivery";
import { GatewayServiceClient } from "@hermes/proto/hermes/v1/gateway";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { botChat, createBot, rpc, sendAndWait } from "../support/delivery-fixtures.js";
import { startTestGateway, type TestGateway } from "../support/gateway-harness.js";

/**
 * Bot-to-bot delivery between bots of one gateway, with the embedded `local` provider: the ack, the
 * turn in the target's Bot Chat with the attribution prefix, the completion notification in the
 * sender's Bot Chat, receipts over real gRPC, message_agent from a chat turn, and bad input.
 */

let t: TestGateway;
let deliveries: DeliveryServiceClient;
let gw: GatewayServiceClient;

beforeAll(async () => {
  t = await startTestGateway();
  createBot(t, "alice", { title: "Researcher", description: "finds and cites sources" });
  createBot(t, "bob", { title: "Reviewer", description: "reviews code" });
  createBot(t, "carol", { title: "Writer" });
  deliveries = t.client(DeliveryServiceClient);
  gw = t.client(GatewayServiceClient);
});
afterAll(() => t?.destroy());

async function failure(p: Promise<unknown>): Promise<HermesError> {
  try {
    await p;
  } catch (err) {
    return err as HermesError;
  }
  throw new Error("expected a failure");
}

describe("local delivery", () => {
  it("acks queued with a delivery id, runs the turn in the target's Bot Chat and notifies the sender", async () => {
    const ack = await rpc.send(deliveries, {
      profile: "alice",
      target: "bob",
      message: "please review PR 7",
      ttl_seconds: 0,
      delivery_id: "",
      wait: false,
    });
    expect(ack).toMatchObject({ status: "queued", delivery_id: expect.stringMatching(/^dlv_[0-9a-f]{24}$/) });
    const receipt = await t.gateway.deliveries.wait(ack.delivery_id);
    expect(receipt).toMatchObject({
      delivery_id: ack.delivery_id,
      from: `alice@${t.gateway.id}`,
      target: "bob",
      state: "settled",
      reason: null,
      error: null,
      attempts: 1,
    });
    expect(receipt.reply).toContain("Hi alice, bob (Reviewer) here.");

    const bob = botChat(t, "bob");
    expect(bob.at(-2)).toMatchObject({ role: "user", content: "Message from 🤖 alice (@alice): please review PR 7" });
    expect(bob.at(-2)!.meta).toMatchObject({ delivery_id: ack.delivery_id });
    expect(bob.at(-1)).toMatchObject({ role: "assistant", content: receipt.reply });
    await eventually(() =>
      expect(botChat(t, "alice").at(-1)).toMatchObject({
        role: "notification",
        content: receipt.reply,
        meta: { delivery_id: ack.delivery_id, state: "settled", target: "bob" },
      }),
    );

    const shown = await rpc.get(deliveries, ack.delivery_id);
    expect(shown).toMatchObject({ state: "settled", attempts: 1, reply: receipt.reply, from: `alice@${t.gateway.id}` });
    expect(shown.reason).toBeUndefined();
  });

  it("waits for the outcome when asked (SendMessage wait)", async () => {
    const r = await rpc.send(deliveries, {
      profile: "carol",
      target: "alice",
      message: "who are you?",
      ttl_seconds: 0,
      delivery_id: "",
      wait: true,
    });
    expect(r.receipt).toMatchObject({ state: "settled", reply: expect.stringContaining("I'm alice (Researcher), @alice.") });
  });

  it("lets a bot message a teammate with message_agent from its Bot Chat, and the reply comes back as a notification", async () => {
    const turn = await rpc.chat(gw, { profile: "alice", text: "ask bob to check the build logs", session_id: "" });
    expect(turn.reply).toMatch(/^I've sent your message to bob \(delivery dlv_[0-9a-f]{24}\)/);
    const id = /delivery (dlv_[0-9a-f]{24})/.exec(turn.reply)![1]!;
    const alice = botChat(t, "alice");
    const call1 = alice.find((m) => m.role === "assistant" && Array.isArray(m.meta["tool_calls"]));
    expect(call1?.meta["tool_calls"]).toEqual([
      expect.objectContaining({
        name: "message_agent",
        arguments: JSON.stringify({ target: "bob", message: "Could you check the build logs?" }),
      }),
    ]);
    expect(alice.find((m) => m.role === "tool")?.content).toBe(JSON.stringify({ status: "queued", delivery_id: id }));
    const receipt = await t.gateway.deliveries.wait(id);
    expect(receipt.state).toBe("settled");
    await eventually(() => {
      const last = botChat(t, "alice").at(-1)!;
      expect(last).toMatchObject({ role: "notification", meta: { delivery_id: id } });
      // The notification lands after the turn that sent the message, never inside it.
      const turnEnd = alice.find((m) => m.role === "assistant" && m.content === turn.reply)!;
      expect(last.seq).toBeGreaterThan(turnEnd.seq);
    });
    expect(botChat(t, "bob").some((m) => m.content === "Message from 🤖 alice (@alice): Could you check the build logs?")).toBe(true);
  });

  it("offers message_agent only in the canonical Bot Chat", async () => {
    const other = t.gateway.sessions.ensure({ profile: "alice", platform: "api", chat_type: "dm", chat_id: "side" }, "api", "side");
    const r = await rpc.chat(gw, { profile: "alice", text: "ask bob to do something", session_id: other.session_id });
    expect(r.reply).toContain("I can't message other bots from this chat");
  });

  it("refuses an unknown target with a typed error listing the valid teammates", async () => {
    const e = await failure(
      rpc.send(deliveries, { profile: "alice", target: "zed", message: "hi", ttl_seconds: 0, delivery_id: "", wait: false }),
    );
    expect(e.reason).toBe("unknown_target");
    expect(e.message).toContain("Valid targets: default, bob, carol.");
    expect(e.data["teammates"]).toEqual(["default", "bob", "carol"]);
    // The tool gets the same refusal as JSON, with reason and teammates.
    const turn = await rpc.chat(gw, { profile: "alice", text: "ask zed to help", session_id: "" });
    expect(turn.reply).toContain("I couldn't message zed [reason: unknown_target]");
  });

  it("refuses a message over 16,000 characters, naming the limit", async () => {
    const e = await failure(
      rpc.send(deliveries, {
        profile: "alice",
        target: "bob",
        message: "x".repeat(16_001),
        ttl_seconds: 0,
        delivery_id: "",
        wait: false,
      }),
    );
    expect(e.reason).toBe("payload_too_large");
    expect(e.message).toContain("16,001 characters; the limit is 16,000");
    expect(e.data).toMatchObject({ limit: 16_000 });
    const atLimit = await sendAndWait(t, "alice", "carol", "é".repeat(16_000));
    expect(atLimit.state).toBe("settled");
  });

  it("delivers quotes, $(...) and backticks verbatim", async () => {
    const tricky = `He said "it's fine" && echo $(rm -rf /) \`whoami\` 'single' \\n $HOME; exit 1`;
    const r = await sendAndWait(t, "bob", "carol", tricky);
    expect(r.state).toBe("settled");
    const carol = botChat(t, "carol");
    expect(carol.some((m) => m.content === `Message from 🤖 bob (@bob): ${tricky}`)).toBe(true);
  });

  it("is idempotent by delivery id: same payload answers with the same delivery, another payload is a conflict", async () => {
    const req = { profile: "alice", target: "bob", message: "once only", ttl_seconds: 0, delivery_id: "ticket-42", wait: true };
    const first = await rpc.send(deliveries, req);
    const again = await rpc.send(deliveries, req);
    expect(again.receipt).toEqual(first.receipt);
    expect(botChat(t, "bob").filter((m) => m.content.endsWith("once only"))).toHaveLength(1);
    const e = await failure(rpc.send(deliveries, { ...req, message: "something else" }));
    expect(e.reason).toBe("idempotency_conflict");
  });

  it("refuses messaging yourself and an empty message", async () => {
    expect(
      (
        await failure(
          rpc.send(deliveries, { profile: "alice", target: "alice", message: "hi", ttl_seconds: 0, delivery_id: "", wait: false }),
        )
      ).reason,
    ).toBe("invalid_params");
    expect(
      (
        await failure(
          rpc.send(deliveries, { profile: "alice", target: "bob", message: "   ", ttl_seconds: 0, delivery_id: "", wait: false }),
        )
      ).reason,
    ).toBe("invalid_params");
  });

  it("lists receipts by profile and state", async () => {
    const all = await rpc.list(deliveries, { profile: "alice", state: "", limit: 0 });
    expect(all.deliveries.length).toBeGreaterThan(2);
    expect(all.deliveries.every((d) => d.side === "outbox")).toBe(true);
    const settled = await rpc.list(deliveries, { profile: "", state: "settled", limit: 2 });
    expect(settled.deliveries).toHaveLength(2);
    expect((await failure(rpc.list(deliveries, { profile: "", state: "done", limit: 0 }))).reason).toBe("invalid_params");
  });

  it("exposes delivery metrics", async () => {
    const text = await t.gateway.metrics.registry.metrics();
    expect(text).toMatch(/hermes_deliveries_total\{[^}]*side="outbox",state="settled",reason="none"[^}]*\} [1-9]/);
    expect(text).toMatch(/hermes_delivery_queue_depth\{[^}]*side="ingress"[^}]*\} 0/);
    expect(text).toMatch(/hermes_agent_builds_total\{[^}]*\} [1-9]/);
  });
});
