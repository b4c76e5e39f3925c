import { describe, expect, it } from "vitest";
import { MESSAGE_AGENT_TOOL, parseMessageAgentArgs } from "../../delivery/core/message-agent-tool.js";
import { findDelegation, LocalProvider, localTurn, PASS, type Persona } from "./local-provider.js";
import type { ChatMessage, TurnRequest, TurnResult } from "./provider.js";

const alice: Persona = {
  display_name: "Alice",
  handle: "alice",
  title: "Researcher",
  soul: "I find and cite sources. I never guess.\nSecond line.",
};

const user = (content: string, name?: string): ChatMessage => ({ role: "user", content, ...(name ? { name } : {}) });
const botChat = (messages: ChatMessage[]): TurnRequest => ({ model: "local", system_prompt: "", messages, tools: [MESSAGE_AGENT_TOOL] });
const room = (messages: ChatMessage[]): TurnRequest => ({ model: "local", system_prompt: "", messages, turn_kind: "room" });

function textOf(result: TurnResult): string {
  if (result.kind !== "text") throw new Error(`expected text, got ${JSON.stringify(result)}`);
  return result.text;
}

describe("persona answers", () => {
  it("answers in the persona with name, title and SOUL", () => {
    expect(textOf(localTurn(alice, botChat([user("What is 2+2?")])))).toBe(
      'Alice (Researcher) here. You said: "What is 2+2?". I find and cite sources.',
    );
  });

  it("introduces itself", () => {
    expect(textOf(localTurn(alice, botChat([user("Who are you?")])))).toBe("I'm Alice (Researcher), @alice. I find and cite sources.");
    expect(textOf(localTurn({ display_name: "Bob", handle: "bob" }, botChat([user("introduce yourself")])))).toBe("I'm Bob, @bob.");
  });

  it("greets a teammate who wrote through delivery", () => {
    const msg = user("Message from 🤖 Bob Builder (@bob): Can you find the 2023 figures?");
    expect(textOf(localTurn(alice, botChat([msg])))).toBe(
      'Hi Bob Builder, Alice (Researcher) here. You said: "Can you find the 2023 figures?". I find and cite sources.',
    );
  });

  it("is deterministic for the same input", async () => {
    const provider = new LocalProvider(alice);
    const req = botChat([user("hello"), { role: "assistant", content: "hi" }, user("ask @bob to check the logs")]);
    const a = await provider.complete(req);
    const b = await provider.complete(structuredClone(req));
    expect(a).toEqual(b);
    expect(provider.name).toBe("local");
  });

  it("quotes long messages shortened", () => {
    const out = textOf(localTurn(alice, botChat([user("x".repeat(500))])));
    expect(out).toContain(`"${"x".repeat(200)}…"`);
  });

  it("greets on an empty transcript", () => {
    expect(textOf(localTurn(alice, botChat([])))).toBe("Alice (Researcher) here. I find and cite sources.");
  });
});

describe("transcript questions", () => {
  it("repeats the previous user message", () => {
    const msgs = [user("The code word is mango."), { role: "assistant", content: "ok" } as ChatMessage, user("What did I just say?")];
    expect(textOf(localTurn(alice, botChat(msgs)))).toBe('You said: "The code word is mango.".');
    expect(textOf(localTurn(alice, botChat([user("what did I say?")])))).toBe("This is the first thing you've said to me in this chat.");
  });

  it("remembers a name and notes", () => {
    const msgs = [user("Hi, my name is Priya."), user("Remember that the deadline is Friday."), user("What's my name?")];
    expect(textOf(localTurn(alice, botChat(msgs)))).toBe("Your name is Priya.");
    expect(textOf(localTurn(alice, botChat(msgs.slice(0, 2))))).toBe('Noted: "the deadline is Friday".');
    expect(textOf(localTurn(alice, botChat([...msgs, user("What did I ask you to remember?")])))).toBe(
      'You asked me to remember: "the deadline is Friday".',
    );
    expect(textOf(localTurn(alice, botChat([user("what is my name")])))).toBe("You haven't told me your name yet.");
  });

  it("counts messages", () => {
    expect(textOf(localTurn(alice, botChat([user("a"), user("b"), user("how many messages have I sent?")])))).toBe(
      "You've sent me 3 messages in this chat.",
    );
  });

  it("recalls what a teammate said", () => {
    const msgs = [user("Message from 🤖 Bob (@bob): The build is green."), user("What did bob say?")];
    expect(textOf(localTurn(alice, botChat(msgs)))).toBe('Bob said: "The build is green.".');
    expect(textOf(localTurn(alice, botChat([user("what did carol reply?")])))).toBe("I haven't heard from carol in this chat.");
  });

  it("reacts to a failed delivery notification", () => {
    const msg = user("Delivery to bob failed [reason: provider_quota_limit]: You exceeded your current quota");
    expect(textOf(localTurn(alice, botChat([msg])))).toBe(
      "My message to bob did not get through (reason: provider_quota_limit): You exceeded your current quota",
    );
  });
});

describe("message_agent", () => {
  it.each([
    ["ask @bob to summarise the report.", "bob", "Could you summarise the report?"],
    ["Please ask bob to check the logs", "bob", "Could you check the logs?"],
    ["tell bob: the build is green", "bob", "the build is green"],
    ["Tell @carol that lunch is at noon.", "carol", "lunch is at noon."],
    ["message bob can you review PR 12?", "bob", "can you review PR 12?"],
    ["message moxie@vps: status?", "moxie@vps", "status?"],
    ["send spark/researcher a message: find sources on X", "spark/researcher", "find sources on X"],
    ["ask dixie: what's the ETA?", "dixie", "what's the ETA?"],
  ])("%j → message_agent(%s)", (prompt, target, message) => {
    const result = localTurn(alice, botChat([user(prompt)]));
    expect(result.kind).toBe("tool_calls");
    if (result.kind !== "tool_calls") return;
    expect(result.tool_calls).toHaveLength(1);
    const call = result.tool_calls[0]!;
    expect(call.name).toBe("message_agent");
    expect(call.id).toMatch(/^call_[0-9a-f]{16}$/);
    expect(parseMessageAgentArgs(call.arguments)).toEqual({ target, message });
  });

  it("passes quotes, $(...) and backticks through verbatim", () => {
    const body = `run \`ls\` and $(whoami) with "quotes" and 'single'`;
    const result = localTurn(alice, botChat([user(`tell bob: ${body}`)]));
    if (result.kind !== "tool_calls") throw new Error("expected a tool call");
    expect(parseMessageAgentArgs(result.tool_calls[0]!.arguments).message).toBe(body);
  });

  it.each([
    "I want to ask whether to ship",
    "can you ask me to do it",
    "tell me a joke",
    "ask yourself to stop",
    "tell alice: hi",
    "ask about the weather",
  ])("does not treat %j as a delegation", (prompt) => {
    expect(findDelegation(prompt, alice)).toBeUndefined();
    expect(localTurn(alice, botChat([user(prompt)])).kind).toBe("text");
  });

  it("explains when the tool is not offered (not a canonical Bot Chat)", () => {
    const req: TurnRequest = { model: "local", system_prompt: "", messages: [user("ask bob to check")] };
    expect(textOf(localTurn(alice, req))).toContain("can't message other bots from this chat");
  });

  it("after the tool result it says it sent the message", () => {
    const first = localTurn(alice, botChat([user("ask bob to check the logs")]));
    if (first.kind !== "tool_calls") throw new Error("expected a tool call");
    const call = first.tool_calls[0]!;
    const msgs: ChatMessage[] = [
      user("ask bob to check the logs"),
      { role: "assistant", content: first.text ?? "", tool_calls: [call] },
      { role: "tool", tool_call_id: call.id, name: "message_agent", content: JSON.stringify({ status: "queued", delivery_id: "dlv_7" }) },
    ];
    expect(textOf(localTurn(alice, botChat(msgs)))).toBe(
      "I've sent your message to bob (delivery dlv_7). I'll pass on the reply when it arrives.",
    );
  });

  it("reports a tool error with its reason", () => {
    const call = { id: "call_x", name: "message_agent", arguments: JSON.stringify({ target: "zed", message: "hi" }) };
    const msgs: ChatMessage[] = [
      user("tell zed: hi"),
      { role: "assistant", content: "", tool_calls: [call] },
      { role: "tool", tool_call_id: "call_x", content: JSON.stringify({ error: "no teammate is called zed", reason: "unknown_target" }) },
    ];
    expect(textOf(localTurn(alice, botChat(msgs)))).toBe("I couldn't message zed [reason: unknown_target]: no teammate is called zed");
  });

  it("reports non-JSON and other tool results", () => {
    const call = { id: "c1", name: "search", arguments: "{}" };
    const msgs: ChatMessage[] = [
      user("search"),
      { role: "assistant", content: "", tool_calls: [call] },
      { role: "tool", tool_call_id: "c1", content: "3 hits" },
    ];
    expect(textOf(localTurn(alice, botChat(msgs)))).toBe('The search tool returned: "3 hits".');
    const mcall = { id: "c2", name: "message_agent", arguments: "not json" };
    const msgs2: ChatMessage[] = [
      user("x"),
      { role: "assistant", content: "", tool_calls: [mcall] },
      { role: "tool", tool_call_id: "c2", content: "oops" },
    ];
    expect(textOf(localTurn(alice, botChat(msgs2)))).toBe('I tried to message the teammate; the tool said: "oops".');
  });
});

describe("room turns", () => {
  it("answers the human's unaddressed message once, then passes", () => {
    const msgs = [user("What should we build next?", "user")];
    expect(textOf(localTurn(alice, room(msgs)))).toContain("Alice (Researcher) here.");
    const after: ChatMessage[] = [...msgs, { role: "assistant", content: "A search tool." }];
    expect(textOf(localTurn(alice, room(after)))).toBe(PASS);
  });

  it("passes when others are mentioned but not itself", () => {
    expect(textOf(localTurn(alice, room([user("@bob what do you think?", "user")])))).toBe(PASS);
    expect(textOf(localTurn(alice, room([user("@bob and @carol: thoughts?")])))).toBe(PASS);
  });

  it("answers when mentioned by handle, display-name slug, @all or @everyone", () => {
    for (const text of ["@alice thoughts?", "@bob, @Alice: thoughts?", "@all status please", "@everyone ping", "@alice."]) {
      expect(textOf(localTurn(alice, room([user(text, "user")])))).not.toBe(PASS);
    }
    const longName: Persona = { display_name: "Research Buddy", handle: "researcher" };
    expect(textOf(localTurn(longName, room([user("@research-buddy hi")])))).not.toBe(PASS);
    expect(textOf(localTurn(longName, room([user("@researchbuddy hi")])))).not.toBe(PASS);
  });

  it("passes on another bot's unaddressed reply, so a room settles", () => {
    const msgs = [user("What next?", "user"), { role: "assistant", content: "Search." } as ChatMessage, user("I'd say docs.", "bob")];
    expect(textOf(localTurn(alice, room(msgs)))).toBe(PASS);
  });

  it("answers another bot that mentions it", () => {
    expect(textOf(localTurn(alice, room([user("What next?", "user"), user("@alice can you cite a source?", "bob")])))).not.toBe(PASS);
  });

  it("never calls tools in a room", () => {
    const req = { ...room([user("@alice ask bob to check the logs", "user")]), tools: [MESSAGE_AGENT_TOOL] };
    expect(localTurn(alice, req).kind).toBe("text");
  });

  it("passes on an empty room transcript", () => {
    expect(textOf(localTurn(alice, room([])))).toBe(PASS);
  });
});
