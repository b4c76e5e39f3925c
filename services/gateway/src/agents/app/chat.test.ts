import { describe, expect, it } from "vitest";
import type { SessionRow } from "../../identity/store/sessions-store.js";
import { isCanonicalBotChat, toChatMessages } from "./chat.js";

const AT = "2026-01-01T00:00:00.000Z";

describe("toChatMessages", () => {
  it("maps the stored transcript to provider messages; notifications reach the model as user messages", () => {
    const calls = [{ id: "call_1", name: "message_agent", arguments: '{"target":"bob","message":"hi"}' }];
    const out = toChatMessages([
      { seq: 1, role: "user", content: "ask bob", meta: {}, created_at: AT },
      { seq: 2, role: "assistant", content: "", meta: { tool_calls: calls }, created_at: AT },
      { seq: 3, role: "tool", content: '{"status":"queued"}', meta: { tool_call_id: "call_1", name: "message_agent" }, created_at: AT },
      { seq: 4, role: "assistant", content: "sent", meta: { model: "m" }, created_at: AT },
      { seq: 5, role: "notification", content: "the reply", meta: { model_text: "Message from 🤖 bob (@bob): the reply" }, created_at: AT },
      { seq: 6, role: "notification", content: "Delivery to x failed [reason: unknown]: y", meta: {}, created_at: AT },
    ]);
    expect(out).toEqual([
      { role: "user", content: "ask bob" },
      { role: "assistant", content: "", tool_calls: calls },
      { role: "tool", tool_call_id: "call_1", name: "message_agent", content: '{"status":"queued"}' },
      { role: "assistant", content: "sent" },
      { role: "user", content: "Message from 🤖 bob (@bob): the reply" },
      { role: "user", content: "Delivery to x failed [reason: unknown]: y" },
    ]);
  });
});

describe("isCanonicalBotChat", () => {
  const session = (over: Partial<SessionRow>): SessionRow => ({
    session_id: "ses_1",
    session_key: "agent:bob:bot:dm:bot-chat",
    profile_name: "bob",
    title: "Bot Chat",
    kind: "bot_chat",
    origin: { profile: "bob", platform: "bot", chat_type: "dm", chat_id: "bot-chat" },
    model_override: null,
    provider_override: null,
    created_at: AT,
    updated_at: AT,
    ...over,
  });
  it("is true only for the profile's own Bot Chat", () => {
    expect(isCanonicalBotChat(session({}))).toBe(true);
    expect(isCanonicalBotChat(session({ kind: "api" }))).toBe(false);
    expect(isCanonicalBotChat(session({ session_key: "agent:bob:api:dm:1" }))).toBe(false);
    expect(isCanonicalBotChat(session({ profile_name: "alice" }))).toBe(false);
  });
});
