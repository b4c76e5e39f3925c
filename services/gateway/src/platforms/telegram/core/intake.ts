import { HermesError } from "@hermes/common/pure";
import { MESSAGE_LIMIT_CHARS, messageLength } from "@hermes/contract";
import { type ModelCommand, parseModelCommand } from "../../../agents/core/channel-overrides.js";
import { isChatAllowed, type TelegramPlatformConfig } from "./config.js";

export type TelegramChatType = "private" | "group" | "supergroup" | "channel";
const CHAT_TYPES: readonly string[] = ["private", "group", "supergroup", "channel"] satisfies TelegramChatType[];

/** Where a message was written: the chat and, in a forum supergroup, its topic. Ids as decimal text. */
export interface TelegramChat {
  id: string;
  type: TelegramChatType;
  /** The forum topic (`message_thread_id` of a topic message); absent in the General topic and outside forums. */
  topic_id?: string | undefined;
}

export interface TelegramSender {
  id: string;
  display_name: string;
  username?: string | undefined;
}

interface MessageFacts {
  update_id: number;
  message_id: number;
  chat: TelegramChat;
  sender: TelegramSender;
}

export type IgnoreReason =
  | "not_an_update"
  | "edited_message"
  | "channel_post"
  | "unsupported_update"
  | "missing_fields"
  | "service_message"
  | "no_text"
  | "from_bot"
  | "own_message"
  | "command_for_another_bot"
  | "already_refused";

export type ReplyReason = "help" | "unknown_command" | "bad_command" | "too_long";

/**
 * What to do with one update. `turn` and `command` go to the turn engine; `reply` and `refuse` are
 * answered by the platform itself; `ignore` gets silence (the offset still moves past it).
 */
export type IntakeDecision =
  | ({ kind: "turn"; text: string } & MessageFacts)
  | ({
      kind: "command";
      /** The command in canonical form (`/model NAME --global`, any `@botname` removed), as the turn engine parses it. */
      text: string;
      model: ModelCommand;
    } & MessageFacts)
  | { kind: "reply"; update_id: number; chat: TelegramChat; reason: ReplyReason; text: string }
  | { kind: "refuse"; update_id: number; chat: TelegramChat; text: string }
  | { kind: "ignore"; update_id: number | undefined; reason: IgnoreReason; detail?: string | undefined };

/** A message turn or a `/model` command: the updates the turn engine answers. */
export type TelegramWork = Extract<IntakeDecision, { kind: "turn" | "command" }>;

export interface IntakeContext {
  access: Pick<TelegramPlatformConfig, "allow_all" | "allowed_chats">;
  /** Chats already told that the bot does not answer there: from now on they get silence. */
  refused_chats: Pick<ReadonlySet<string>, "has">;
  /** From getMe: the bot's own messages are ignored, and `/cmd@other_bot` is not for us. */
  bot?: { id: string; username?: string | undefined } | undefined;
  /** Longest text taken as a turn, in code points (default: 16,000, as for a bot-to-bot message). */
  max_text_chars?: number | undefined;
}

/** The commands shown in Telegram's menu (setMyCommands). */
export const TELEGRAM_COMMANDS = [
  { command: "model", description: "Show or change the model this chat uses" },
  { command: "help", description: "What this bot understands" },
] as const;

export const HELP_TEXT = [
  "Write to me and I answer. Commands:",
  "/model: show the model this chat uses",
  "/model NAME: use NAME in this chat",
  "/model NAME --global: make NAME the default (a chat with its own override keeps it)",
  "/model --reset: go back to the default",
  "/help: this text",
].join("\n");

export function refusalText(chatId: string): string {
  return (
    "Sorry, this bot does not answer in this chat. " +
    `Its operator can allow it by adding this chat's id (${chatId}) to platforms.telegram.allowed_chats.`
  );
}

/** Message fields that make a message a service message (members joining, pins, topic changes…). */
const SERVICE_FIELDS = [
  "new_chat_members",
  "left_chat_member",
  "new_chat_title",
  "new_chat_photo",
  "delete_chat_photo",
  "group_chat_created",
  "supergroup_chat_created",
  "channel_chat_created",
  "message_auto_delete_timer_changed",
  "migrate_to_chat_id",
  "migrate_from_chat_id",
  "pinned_message",
  "forum_topic_created",
  "forum_topic_edited",
  "forum_topic_closed",
  "forum_topic_reopened",
  "general_forum_topic_hidden",
  "general_forum_topic_unhidden",
  "video_chat_started",
  "video_chat_ended",
  "video_chat_scheduled",
  "video_chat_participants_invited",
  "write_access_allowed",
  "users_shared",
  "chat_shared",
  "boost_added",
  "chat_background_set",
  "proximity_alert_triggered",
  "successful_payment",
  "refunded_payment",
];

/** Media a message may carry instead of text; named in the ignore detail. */
const MEDIA_FIELDS = [
  "sticker",
  "photo",
  "animation",
  "video",
  "video_note",
  "voice",
  "audio",
  "document",
  "contact",
  "location",
  "venue",
  "poll",
  "dice",
  "game",
  "story",
];

const EDITED_FIELDS = ["edited_message", "edited_channel_post", "edited_business_message"];
const CHANNEL_FIELDS = ["channel_post"];

type Json = Record<string, unknown>;

function isRecord(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A Telegram integer id (update_id, message_id, chat and user ids all fit a double exactly). */
function integer(value: unknown): number | undefined {
  return typeof value === "number" && Number.isSafeInteger(value) ? value : undefined;
}

function text(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/** The update_id of a raw update, when it has a usable one. */
export function updateIdOf(raw: unknown): number | undefined {
  if (!isRecord(raw)) return undefined;
  const id = integer(raw["update_id"]);
  return id !== undefined && id >= 0 ? id : undefined;
}

function ignore(update_id: number | undefined, reason: IgnoreReason, detail?: string): IntakeDecision {
  return { kind: "ignore", update_id, reason, ...(detail !== undefined ? { detail } : {}) };
}

function readChat(message: Json): TelegramChat | undefined {
  const chat = message["chat"];
  if (!isRecord(chat)) return undefined;
  const id = integer(chat["id"]);
  const type = text(chat["type"]);
  if (id === undefined || id === 0 || type === undefined || !CHAT_TYPES.includes(type)) return undefined;
  const topic = message["is_topic_message"] === true ? integer(message["message_thread_id"]) : undefined;
  return { id: String(id), type: type as TelegramChatType, ...(topic !== undefined && topic > 0 ? { topic_id: String(topic) } : {}) };
}

function displayName(user: Json): string {
  const parts = [text(user["first_name"]), text(user["last_name"])].filter((p): p is string => !!p && p.trim().length > 0);
  return parts.length > 0 ? parts.join(" ") : (text(user["title"]) ?? text(user["username"]) ?? "someone");
}

type SenderOutcome = { sender: TelegramSender } | { ignore: IgnoreReason; detail: string };

/**
 * The author. An anonymous group admin or a channel writing in a group arrives with a bot in
 * `from` (GroupAnonymousBot, Channel_Bot) and the real author in `sender_chat`: that is a person
 * (or channel) speaking, not a bot, so it is answered.
 */
function readSender(message: Json, bot: IntakeContext["bot"]): SenderOutcome {
  const from = message["from"];
  const senderChat = message["sender_chat"];
  const chatSender = isRecord(senderChat) && integer(senderChat["id"]) !== undefined ? senderChat : undefined;
  if (isRecord(from)) {
    const id = integer(from["id"]);
    if (id === undefined) return { ignore: "missing_fields", detail: "message.from.id" };
    if (bot && String(id) === bot.id) return { ignore: "own_message", detail: "sent by this bot" };
    if (from["is_bot"] === true && !chatSender) return { ignore: "from_bot", detail: "sent by another bot" };
    if (!chatSender) {
      const username = text(from["username"]);
      return { sender: { id: String(id), display_name: displayName(from), ...(username ? { username } : {}) } };
    }
  }
  if (chatSender) {
    const username = text(chatSender["username"]);
    return { sender: { id: String(chatSender["id"]), display_name: displayName(chatSender), ...(username ? { username } : {}) } };
  }
  return { ignore: "missing_fields", detail: "message.from" };
}

/** `/name` or `/name@bot` at the very start, followed by white space or the end. */
const COMMAND = /^\/([A-Za-z0-9_]{1,32})(?:@([A-Za-z0-9_]{1,64}))?(?=\s|$)/;

function tooLongText(length: number, limit: number): string {
  return (
    `Your message is ${length.toLocaleString("en-US")} characters long; I take at most ${limit.toLocaleString("en-US")}. ` +
    "Please shorten it or send it in parts."
  );
}

/**
 * Decides what one raw Bot API Update (untrusted JSON) asks for. Never throws: anything it cannot
 * use is an `ignore` with the reason, so the poller always moves past it.
 */
export function classifyUpdate(raw: unknown, ctx: IntakeContext): IntakeDecision {
  if (!isRecord(raw)) return ignore(undefined, "not_an_update", "not a JSON object");
  const updateId = updateIdOf(raw);
  if (updateId === undefined) return ignore(undefined, "not_an_update", "no usable update_id");
  const edited = EDITED_FIELDS.find((f) => f in raw);
  if (edited) return ignore(updateId, "edited_message", edited);
  if (CHANNEL_FIELDS.some((f) => f in raw)) return ignore(updateId, "channel_post");
  const message = raw["message"];
  if (message === undefined) {
    const kind = Object.keys(raw).find((k) => k !== "update_id");
    return ignore(updateId, "unsupported_update", kind ?? "empty update");
  }
  if (!isRecord(message)) return ignore(updateId, "missing_fields", "message is not an object");

  const chat = readChat(message);
  if (!chat) return ignore(updateId, "missing_fields", "message.chat");
  const messageId = integer(message["message_id"]);
  if (messageId === undefined) return ignore(updateId, "missing_fields", "message.message_id");
  if (chat.type === "channel" || message["is_automatic_forward"] === true) return ignore(updateId, "channel_post");
  const author = readSender(message, ctx.bot);
  if ("ignore" in author) return ignore(updateId, author.ignore, author.detail);

  const service = SERVICE_FIELDS.find((f) => f in message);
  if (service) return ignore(updateId, "service_message", service);
  const body = text(message["text"]) ?? text(message["caption"]);
  if (body === undefined || body.trim().length === 0) {
    return ignore(updateId, "no_text", MEDIA_FIELDS.find((f) => f in message) ?? "no text");
  }

  if (!isChatAllowed(ctx.access, chat.id)) {
    if (ctx.refused_chats.has(chat.id)) return ignore(updateId, "already_refused", chat.id);
    return { kind: "refuse", update_id: updateId, chat, text: refusalText(chat.id) };
  }
  const limit = ctx.max_text_chars ?? MESSAGE_LIMIT_CHARS;
  const length = messageLength(body);
  if (length > limit) return { kind: "reply", update_id: updateId, chat, reason: "too_long", text: tooLongText(length, limit) };

  const facts: MessageFacts = { update_id: updateId, message_id: messageId, chat, sender: author.sender };
  const command = COMMAND.exec(body);
  if (!command) return { kind: "turn", ...facts, text: body };
  const [whole, name, addressee] = command as unknown as [string, string, string | undefined];
  const username = ctx.bot?.username;
  if (addressee && username && addressee.toLowerCase() !== username.toLowerCase()) {
    return ignore(updateId, "command_for_another_bot", `@${addressee}`);
  }
  const reply = (reason: ReplyReason, replyText: string): IntakeDecision => ({
    kind: "reply",
    update_id: updateId,
    chat,
    reason,
    text: replyText,
  });
  switch (name.toLowerCase()) {
    case "start":
    case "help":
      return reply("help", HELP_TEXT);
    case "model": {
      const canonical = `/model${body.slice(whole.length)}`.trim();
      try {
        return { kind: "command", ...facts, text: canonical, model: parseModelCommand(canonical) };
      } catch (err) {
        return reply("bad_command", err instanceof HermesError ? err.message : String(err));
      }
    }
    default:
      return reply("unknown_command", `I don't know /${name}. I understand /model and /help; anything else you write is a message to me.`);
  }
}
