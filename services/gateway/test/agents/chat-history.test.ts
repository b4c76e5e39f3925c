import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { TranscriptStore } from "../../src/identity/store/sessions-store.js";
import { botChat, createBot, sendAndWait, writeHomeConfig } from "../support/delivery-fixtures.js";
import { startTestGateway, type TestGateway } from "../support/gateway-harness.js";

/**
 * What a turn reads of its session's transcript: the conversation is remembered past the session's
 * warm agent (one warm slot here, so every other turn rebuilds the agent), and a turn needs only
 * the rows added since — a delivery's turn and its notification included — which the transcript
 * store still has when they are few (it wrote them), else reads; never the whole transcript again,
 * yet the model sees all of it.
 */

let t: TestGateway;

beforeAll(async () => {
  const home = mkdtempSync(join(tmpdir(), "hermes-history-"));
  writeHomeConfig(home, { agents: { max_warm: 1 } });
  t = await startTestGateway({ home });
  createBot(t, "alice");
  createBot(t, "bob");
});
afterAll(() => t?.destroy());

describe("turn history", () => {
  it("reads only the new rows after the agent lost its slot, and the model still sees the whole conversation", async () => {
    const chat = t.gateway.chat;
    await chat.turn({ profile: "alice", text: "please remember that the vault code is 4711" });
    await chat.turn({ profile: "bob", text: "hello" }); // takes the one warm slot
    const builds = chat.agents.builds;
    const wholeReads = vi.spyOn(TranscriptStore.prototype, "list");
    const tailReads = vi.spyOn(TranscriptStore.prototype, "from");
    const keptTails = vi.spyOn(TranscriptStore.prototype, "keptFrom");
    try {
      // The delivery's turn rebuilds alice's agent; bob's Bot Chat gets the notification meanwhile.
      const receipt = await sendAndWait(t, "bob", "alice", "the build is green");
      expect(receipt.state).toBe("settled");
      expect(chat.agents.builds).toBe(builds + 1);
      const remembered = await chat.turn({ profile: "alice", text: "what did I ask you to remember?" });
      expect(remembered.reply).toBe('You asked me to remember: "the vault code is 4711".');
      const heard = await chat.turn({ profile: "alice", text: "what did bob say?" });
      expect(heard.reply).toContain('"the build is green"');
      expect(wholeReads).not.toHaveBeenCalled();
      expect(keptTails).toHaveBeenCalledTimes(3);
      expect(tailReads).not.toHaveBeenCalled();
      // bob's agent lost its slot too; the notification with alice's reply is part of what his turn reads.
      const fromAlice = await chat.turn({ profile: "bob", text: "what did alice say?" });
      expect(fromAlice.reply).toMatch(/^alice said: "Hi bob, alice here\./);
      expect(wholeReads).not.toHaveBeenCalled();
      expect(tailReads).not.toHaveBeenCalled();
      expect(chat.agents.builds).toBe(builds + 2);
      // More notifications than the store keeps of a session: bob's next turn reads them.
      for (let i = 1; i <= 9; i++) expect((await sendAndWait(t, "bob", "alice", `update ${i}`)).state).toBe("settled");
      const afterMany = await chat.turn({ profile: "bob", text: "what did alice say?" });
      expect(afterMany.reply).toMatch(/^alice said: "Hi bob, alice here\./);
      expect(tailReads).toHaveBeenCalledTimes(1);
      expect(wholeReads).not.toHaveBeenCalled();
    } finally {
      wholeReads.mockRestore();
      tailReads.mockRestore();
      keptTails.mockRestore();
    }
    const alice = botChat(t, "alice");
    // Four turns, then the nine deliveries' turns.
    expect(alice.map((m) => m.role)).toEqual(Array.from({ length: 13 }, () => ["user", "assistant"]).flat());
    expect(botChat(t, "bob").map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "notification",
      "user",
      "assistant",
      ...Array<string>(9).fill("notification"),
      "user",
      "assistant",
    ]);
  });
});
