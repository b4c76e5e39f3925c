import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { classifyUpdate, HELP_TEXT, type IntakeContext, type IntakeDecision, refusalText } from "./intake.js";

const BOT = { id: "7000", username: "hermes_bot" };
const ctx: IntakeContext = {
  access: { allow_all: false, allowed_chats: ["42", "-1001234567890", "-555"] },
  refused_chats: new Set(["99"]),
  bot: BOT,
};

const alice = { id: 42, is_bot: false, first_name: "Alice", last_name: "Liddell", username: "alice" };

function privateMessage(text: unknown, extra: Record<string, unknown> = {}) {
  return { update_id: 10, message: { message_id: 5, date: 1, chat: { id: 42, type: "private" }, from: alice, text, ...extra } };
}

function topicMessage(text: string, extra: Record<string, unknown> = {}) {
  return {
    update_id: 11,
    message: {
      message_id: 6,
      date: 1,
      chat: { id: -1001234567890, type: "supergroup", is_forum: true, title: "Team" },
      from: alice,
      message_thread_id: 7,
      is_topic_message: true,
      text,
      ...extra,
    },
  };
}

const privateChat = { id: "42", type: "private" };
const sender = { id: "42", display_name: "Alice Liddell", username: "alice" };

describe("update intake: turns", () => {
  it("a private text message is a turn with chat, type, sender and text", () => {
    expect(classifyUpdate(privateMessage("hello"), ctx)).toEqual({
      kind: "turn",
      update_id: 10,
      message_id: 5,
      chat: privateChat,
      sender,
      text: "hello",
    });
  });

  it("a forum topic message carries its topic id; a reply thread outside a forum does not", () => {
    const topic = classifyUpdate(topicMessage("review this"), ctx);
    expect(topic).toMatchObject({ kind: "turn", chat: { id: "-1001234567890", type: "supergroup", topic_id: "7" }, text: "review this" });
    const replyThread = classifyUpdate(topicMessage("re", { is_topic_message: undefined }), ctx);
    expect(replyThread).toMatchObject({ kind: "turn", chat: { id: "-1001234567890", type: "supergroup" } });
    expect((replyThread as { chat: object }).chat).not.toHaveProperty("topic_id");
  });

  it("a group message, and a photo with a caption (the caption is the text)", () => {
    const group = { update_id: 12, message: { message_id: 1, chat: { id: -555, type: "group" }, from: alice, text: "hi all" } };
    expect(classifyUpdate(group, ctx)).toMatchObject({ kind: "turn", chat: { id: "-555", type: "group" }, text: "hi all" });
    expect(classifyUpdate(privateMessage(undefined, { photo: [{ file_id: "x" }], caption: "what is this?" }), ctx)).toMatchObject({
      kind: "turn",
      text: "what is this?",
    });
  });

  it("an anonymous group admin (GroupAnonymousBot with sender_chat) is answered as the group", () => {
    const update = {
      update_id: 13,
      message: {
        message_id: 2,
        chat: { id: -555, type: "group", title: "Ops" },
        from: { id: 1087968824, is_bot: true, first_name: "Group", username: "GroupAnonymousBot" },
        sender_chat: { id: -555, type: "group", title: "Ops" },
        text: "status?",
      },
    };
    expect(classifyUpdate(update, ctx)).toMatchObject({ kind: "turn", sender: { id: "-555", display_name: "Ops" } });
  });

  it("Markdown-breaking characters are just text", () => {
    const text = "_*[]()~`>#+-=|{}.! and ``` fences";
    expect(classifyUpdate(privateMessage(text), ctx)).toMatchObject({ kind: "turn", text });
  });

  it("text up to the limit is a turn; over it, a clear reply (code points, so emoji count once)", () => {
    const small = { ...ctx, max_text_chars: 5 };
    expect(classifyUpdate(privateMessage("🤖🤖🤖🤖🤖"), small)).toMatchObject({ kind: "turn" });
    expect(classifyUpdate(privateMessage("🤖🤖🤖🤖🤖🤖"), small)).toEqual({
      kind: "reply",
      update_id: 10,
      chat: privateChat,
      reason: "too_long",
      text: "Your message is 6 characters long; I take at most 5. Please shorten it or send it in parts.",
    });
    expect(classifyUpdate(privateMessage("x".repeat(16_001)), ctx)).toMatchObject({
      kind: "reply",
      reason: "too_long",
      text: expect.stringContaining("16,001 characters long; I take at most 16,000"),
    });
  });
});

describe("update intake: commands", () => {
  const cases: [string, Partial<IntakeDecision>][] = [
    ["/model", { kind: "command", text: "/model", model: { kind: "show" } }],
    [
      "/model gpt-5-mini",
      { kind: "command", text: "/model gpt-5-mini", model: { kind: "set", model: "gpt-5-mini", provider: undefined, global: false } },
    ],
    [
      "/model@hermes_bot big --global",
      { kind: "command", text: "/model big --global", model: { kind: "set", model: "big", provider: undefined, global: true } },
    ],
    ["/model@Hermes_Bot --reset", { kind: "command", text: "/model --reset", model: { kind: "reset" } }],
    ["/model big --provider openai", { kind: "command", model: { kind: "set", model: "big", provider: "openai", global: false } }],
    ["/help", { kind: "reply", reason: "help", text: HELP_TEXT }],
    ["/start", { kind: "reply", reason: "help", text: HELP_TEXT }],
    ["/help@hermes_bot", { kind: "reply", reason: "help" }],
  ];
  it.each(cases)("%s", (text, expected) => {
    expect(classifyUpdate(privateMessage(text), ctx)).toMatchObject(expected);
  });

  it("a /model command keeps the message facts for the turn engine", () => {
    expect(classifyUpdate(topicMessage("/model big"), ctx)).toMatchObject({
      kind: "command",
      update_id: 11,
      message_id: 6,
      chat: { id: "-1001234567890", topic_id: "7" },
      sender: { id: "42" },
    });
  });

  it("a malformed /model gets its usage", () => {
    expect(classifyUpdate(privateMessage("/model a b"), ctx)).toMatchObject({
      kind: "reply",
      reason: "bad_command",
      text: expect.stringMatching(/unexpected "b"; usage: \/model/),
    });
    expect(classifyUpdate(privateMessage("/model --reset big"), ctx)).toMatchObject({ reason: "bad_command" });
    expect(classifyUpdate(privateMessage("/model --frobnicate"), ctx)).toMatchObject({ reason: "bad_command" });
  });

  it("an unknown command gets a help hint", () => {
    expect(classifyUpdate(privateMessage("/weather Berlin"), ctx)).toMatchObject({
      kind: "reply",
      reason: "unknown_command",
      text: "I don't know /weather. I understand /model and /help; anything else you write is a message to me.",
    });
  });

  it("a command for another bot in a group is not ours", () => {
    expect(classifyUpdate(topicMessage("/model@other_bot big"), ctx)).toEqual({
      kind: "ignore",
      update_id: 11,
      reason: "command_for_another_bot",
      detail: "@other_bot",
    });
  });

  it("text that merely starts with a slash is a turn", () => {
    for (const text of ["/ hello", "/😀", "//comment"])
      expect(classifyUpdate(privateMessage(text), ctx)).toMatchObject({ kind: "turn", text });
  });
});

describe("update intake: access", () => {
  const stranger = (update_id: number) => ({
    update_id,
    message: { message_id: 1, chat: { id: 77, type: "private" }, from: { id: 77, is_bot: false, first_name: "Eve" }, text: "hi" },
  });

  it("a chat not allowed gets one polite refusal naming its id", () => {
    expect(classifyUpdate(stranger(1), ctx)).toEqual({
      kind: "refuse",
      update_id: 1,
      chat: { id: "77", type: "private" },
      text: refusalText("77"),
    });
    expect(refusalText("77")).toBe(
      "Sorry, this bot does not answer in this chat. Its operator can allow it by adding this chat's id (77) to platforms.telegram.allowed_chats.",
    );
  });

  it("and silence once the refusal was sent (commands included)", () => {
    const refused = { ...ctx, refused_chats: new Set(["77"]) };
    expect(classifyUpdate(stranger(2), refused)).toEqual({ kind: "ignore", update_id: 2, reason: "already_refused", detail: "77" });
    const command = stranger(3);
    command.message.text = "/help";
    expect(classifyUpdate(command, refused)).toMatchObject({ kind: "ignore", reason: "already_refused" });
  });

  it("stickers and service messages of a stranger get silence, not a refusal", () => {
    const sticker = stranger(4) as { update_id: number; message: Record<string, unknown> };
    delete sticker.message["text"];
    sticker.message["sticker"] = { file_id: "s" };
    expect(classifyUpdate(sticker, ctx)).toMatchObject({ kind: "ignore", reason: "no_text" });
  });

  it("allow_all answers everyone", () => {
    expect(classifyUpdate(stranger(5), { ...ctx, access: { allow_all: true, allowed_chats: [] } })).toMatchObject({ kind: "turn" });
  });
});

describe("update intake: silence, with the reason", () => {
  const cases: [string, unknown, Partial<IntakeDecision>][] = [
    ["null", null, { reason: "not_an_update", update_id: undefined }],
    ["an array", [1, 2], { reason: "not_an_update" }],
    ["a string", "update", { reason: "not_an_update" }],
    ["no update_id", { message: privateMessage("x").message }, { reason: "not_an_update", detail: "no usable update_id" }],
    ["a negative update_id", { update_id: -1, message: {} }, { reason: "not_an_update" }],
    ["a fractional update_id", { update_id: 1.5 }, { reason: "not_an_update" }],
    [
      "an edited message",
      { update_id: 1, edited_message: privateMessage("x").message },
      { reason: "edited_message", detail: "edited_message" },
    ],
    ["an edited channel post", { update_id: 1, edited_channel_post: {} }, { reason: "edited_message" }],
    [
      "a channel post",
      { update_id: 1, channel_post: { message_id: 1, chat: { id: -100, type: "channel" }, text: "news" } },
      { reason: "channel_post" },
    ],
    [
      "a message in a channel",
      { update_id: 1, message: { message_id: 1, chat: { id: -100, type: "channel" }, from: alice, text: "x" } },
      { reason: "channel_post" },
    ],
    ["an automatic forward from the linked channel", privateMessage("x", { is_automatic_forward: true }), { reason: "channel_post" }],
    ["a callback query", { update_id: 1, callback_query: { id: "q" } }, { reason: "unsupported_update", detail: "callback_query" }],
    ["an update with nothing", { update_id: 1 }, { reason: "unsupported_update", detail: "empty update" }],
    ["a message that is not an object", { update_id: 1, message: "hi" }, { reason: "missing_fields", detail: "message is not an object" }],
    ["no chat", { update_id: 1, message: { message_id: 1, from: alice, text: "x" } }, { reason: "missing_fields", detail: "message.chat" }],
    [
      "a chat id that is text",
      privateMessage("x", { chat: { id: "42", type: "private" } }),
      { reason: "missing_fields", detail: "message.chat" },
    ],
    ["an unknown chat type", privateMessage("x", { chat: { id: 42, type: "secret" } }), { reason: "missing_fields" }],
    ["no message_id", privateMessage("x", { message_id: undefined }), { reason: "missing_fields", detail: "message.message_id" }],
    ["no sender", privateMessage("x", { from: undefined }), { reason: "missing_fields", detail: "message.from" }],
    ["a sender without id", privateMessage("x", { from: { is_bot: false } }), { reason: "missing_fields", detail: "message.from.id" }],
    ["another bot", privateMessage("x", { from: { id: 9, is_bot: true, first_name: "B" } }), { reason: "from_bot" }],
    ["this bot itself", privateMessage("x", { from: { id: 7000, is_bot: true, first_name: "H" } }), { reason: "own_message" }],
    ["a sticker", privateMessage(undefined, { sticker: { file_id: "s" } }), { reason: "no_text", detail: "sticker" }],
    ["a photo without caption", privateMessage(undefined, { photo: [] }), { reason: "no_text", detail: "photo" }],
    ["white space only", privateMessage(" \n\t "), { reason: "no_text" }],
    ["text that is not a string", privateMessage(42), { reason: "no_text" }],
    [
      "a member joining",
      privateMessage(undefined, { new_chat_members: [alice] }),
      { reason: "service_message", detail: "new_chat_members" },
    ],
    ["a pinned message", privateMessage("x", { pinned_message: {} }), { reason: "service_message", detail: "pinned_message" }],
    ["a topic created", topicMessage("x", { text: undefined, forum_topic_created: { name: "t" } }), { reason: "service_message" }],
    ["a group moving to a supergroup", privateMessage(undefined, { migrate_to_chat_id: -100999 }), { reason: "service_message" }],
  ];
  it.each(cases)("%s", (_what, update, expected) => {
    expect(classifyUpdate(update, ctx)).toMatchObject({ kind: "ignore", ...expected });
  });
});

describe("update intake: any JSON", () => {
  it("never throws, and every decision has a kind", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(classifyUpdate(value, ctx).kind).toMatch(/^(turn|command|reply|refuse|ignore)$/);
      }),
      { numRuns: 500 },
    );
  });

  it("never throws on message-shaped garbage either", () => {
    const field = fc.oneof(fc.jsonValue(), fc.constant(undefined));
    const message = fc.record({
      message_id: fc.oneof(fc.integer(), field),
      chat: fc.oneof(
        fc.record({
          id: fc.oneof(fc.integer(), field),
          type: fc.oneof(fc.constantFrom("private", "group", "supergroup", "channel"), field),
        }),
        field,
      ),
      from: fc.oneof(fc.record({ id: fc.oneof(fc.integer(), field), is_bot: fc.oneof(fc.boolean(), field), first_name: field }), field),
      text: fc.oneof(fc.string(), field),
      caption: field,
      is_topic_message: field,
      message_thread_id: field,
      sender_chat: field,
    });
    fc.assert(
      fc.property(fc.integer({ min: -5, max: 1e9 }), message, (update_id, m) => {
        const decision = classifyUpdate({ update_id, message: m }, ctx);
        expect(typeof decision.kind).toBe("string");
      }),
      { numRuns: 1000 },
    );
  });
});
