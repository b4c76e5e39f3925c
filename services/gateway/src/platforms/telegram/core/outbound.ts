import type { TelegramChat } from "./intake.js";

/** Telegram's limit on one message's text, counted here in UTF-16 units (never more than Telegram counts). */
export const TELEGRAM_TEXT_LIMIT = 4096;
/** A typing indicator lasts about five seconds in Telegram's clients; it is renewed this often while a turn runs. */
export const TYPING_REFRESH_MS = 4000;

/** The entities this platform produces. Offsets and lengths are in UTF-16 code units, as Telegram counts them. */
export interface TelegramEntity {
  type: "bold" | "code" | "pre";
  offset: number;
  length: number;
  language?: string | undefined;
}

export interface FormattedText {
  text: string;
  entities: TelegramEntity[];
}

const FENCE = /(^|\n)```([A-Za-z0-9_+#.-]{0,32})[ \t]*\n([\s\S]*?)\n```[ \t]*(?=\n|$)/g;
const INLINE = /`([^`\n]+)`|\*\*(?=\S)([^\n]*?\S)\*\*/g;

/**
 * The model's reply as plain text plus entities. Messages are sent without `parse_mode`, so no
 * character of the reply can make Telegram refuse it (MarkdownV2 refuses a whole message for one
 * unescaped `.` or `_`). Three Markdown forms that models use constantly and that cannot be
 * misread become entities: fenced code blocks (pre, with the language), `inline code` and
 * **bold**. Everything else (single `*`/`_`, links, tables) is shown exactly as written.
 */
export function formatReply(source: string): FormattedText {
  let text = "";
  const entities: TelegramEntity[] = [];
  const inline = (segment: string) => {
    let last = 0;
    for (const match of segment.matchAll(INLINE)) {
      text += segment.slice(last, match.index);
      const [, code, bold] = match;
      const content = (code ?? bold)!;
      entities.push({ type: code !== undefined ? "code" : "bold", offset: text.length, length: content.length });
      text += content;
      last = match.index + match[0].length;
    }
    text += segment.slice(last);
  };
  let last = 0;
  for (const match of source.matchAll(FENCE)) {
    const [whole, lead, language, body] = match as unknown as [string, string, string, string];
    inline(source.slice(last, match.index) + lead);
    if (body.length > 0) {
      entities.push({ type: "pre", offset: text.length, length: body.length, ...(language ? { language } : {}) });
      text += body;
    }
    last = match.index + whole.length;
  }
  inline(source.slice(last));
  return { text, entities };
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

const GRAPHEMES = new Intl.Segmenter(undefined, { granularity: "grapheme" });

/**
 * Whether `at` lies between two graphemes (what a reader sees as one character: an emoji joined
 * with ZWJ, a flag, a letter with its combining accents), so a cut there splits none of them.
 */
function isGraphemeBoundary(graphemes: Intl.Segments, textLength: number, at: number): boolean {
  return at <= 0 || at >= textLength || graphemes.containing(at)?.index === at;
}

function insideEntity(entities: readonly TelegramEntity[], at: number): boolean {
  return entities.some((e) => e.offset < at && at < e.offset + e.length);
}

interface Cut {
  /** End of this chunk (exclusive). */
  end: number;
  /** Where the next chunk starts (after the separator that is dropped). */
  next: number;
}

const SEPARATORS: readonly RegExp[] = [/\n{2,}/g, /\n/g, /[ \t]+/g];

/**
 * Where to end the chunk that starts at `start`: the last paragraph break that fits, else the last
 * line break, else the last space; a break outside entities beats one inside at the same level.
 * With no break at all it cuts at the last grapheme boundary that fits; only a single grapheme
 * longer than a message is cut inside, and then between code points, never between the halves of
 * a surrogate pair.
 */
function chooseCut(text: string, graphemes: Intl.Segments, start: number, limit: number, entities: readonly TelegramEntity[]): Cut {
  const window = text.slice(start, start + limit + 1);
  const between = (at: number) => isGraphemeBoundary(graphemes, text.length, at);
  let fallback: Cut | undefined;
  for (const separator of SEPARATORS) {
    let best: Cut | undefined;
    let bestInside: Cut | undefined;
    for (const match of window.matchAll(separator)) {
      const end = start + match.index;
      if (end === start || end - start > limit) continue;
      const cut = { end, next: end + match[0].length };
      if (!between(cut.end) || !between(cut.next)) continue;
      if (insideEntity(entities, end)) bestInside = cut;
      else best = cut;
    }
    if (best) return best;
    fallback ??= bestInside;
  }
  if (fallback) return fallback;
  let end = start + limit;
  const grapheme = graphemes.containing(end);
  if (grapheme && grapheme.index > start) end = grapheme.index;
  else if (isHighSurrogate(text.charCodeAt(end - 1)) && end - 1 > start) end -= 1;
  return { end, next: end };
}

/** The entities of [start, end), clipped to it and counted from `start`; empty pieces are dropped. */
function clipEntities(entities: readonly TelegramEntity[], start: number, end: number): TelegramEntity[] {
  const out: TelegramEntity[] = [];
  for (const e of entities) {
    const from = Math.max(e.offset, start);
    const to = Math.min(e.offset + e.length, end);
    if (to > from) out.push({ ...e, offset: from - start, length: to - from });
  }
  return out;
}

/**
 * Splits a formatted reply into messages of at most `limit` UTF-16 units, at paragraph, line or
 * word boundaries, never inside a grapheme. An entity that spans a cut (a code block longer than a message) continues in
 * the next message with the same type. Chunks that would be only white space are left out.
 */
export function splitFormatted(formatted: FormattedText, limit = TELEGRAM_TEXT_LIMIT): FormattedText[] {
  const { text, entities } = formatted;
  const graphemes = GRAPHEMES.segment(text);
  const chunks: FormattedText[] = [];
  let start = 0;
  while (start < text.length) {
    const cut = text.length - start <= limit ? { end: text.length, next: text.length } : chooseCut(text, graphemes, start, limit, entities);
    const piece = text.slice(start, cut.end);
    if (piece.trim().length > 0) chunks.push({ text: piece, entities: clipEntities(entities, start, cut.end) });
    start = cut.next;
  }
  return chunks;
}

/** sendMessage parameters, as this platform fills them. */
export interface SendMessageParams {
  chat_id: number;
  text: string;
  entities?: TelegramEntity[] | undefined;
  message_thread_id?: number | undefined;
}

/** Where an answer to `chat` goes: the same chat and, in a forum, the same topic. */
export function replyTarget(chat: TelegramChat): Pick<SendMessageParams, "chat_id" | "message_thread_id"> {
  return { chat_id: Number(chat.id), ...(chat.topic_id !== undefined ? { message_thread_id: Number(chat.topic_id) } : {}) };
}

/** The messages that carry `reply` to `chat` (none when the reply is empty). */
export function planReply(chat: TelegramChat, reply: string): SendMessageParams[] {
  const target = replyTarget(chat);
  return splitFormatted(formatReply(reply)).map((chunk) => ({
    ...target,
    text: chunk.text,
    ...(chunk.entities.length > 0 ? { entities: chunk.entities } : {}),
  }));
}

const FAILURE_SENTENCES: Record<string, string> = {
  provider_auth_or_access: "The model provider refused this bot's credentials; its operator has to check the API key.",
  provider_quota_limit: "The model provider's quota or credit is used up; the operator has to top it up.",
  provider_rate_limit: "The model provider is rate limiting this bot; try again in a minute.",
  provider_server_error: "The model provider is having trouble; try again in a while.",
  context_overflow: "This conversation no longer fits the model's context window.",
  missing_config: "The bot is not fully configured (model or provider); its operator has to fix the config.",
  model_unavailable: "The model this chat uses is not available; pick another with /model.",
  runtime_offline: "The bot is restarting; try again shortly.",
  slot_wait_timeout: "The bot is busy with other chats; try again shortly.",
  target_busy: "The bot is busy with other chats; try again shortly.",
  delivery_timeout: "Answering took too long and was stopped; try again.",
  queued_expired: "The message waited too long to be answered; try again.",
  payload_too_large: "The message is too long for the bot; please shorten it.",
  not_found: "The profile this bot answers as does not exist; its operator has to fix platforms.telegram.profile.",
  profile_deleted: "The profile this bot answers as was deleted; its operator has to fix platforms.telegram.profile.",
  refused: "The bot's profile is being migrated and cannot answer right now; try again later.",
};

/**
 * The short answer to a turn that failed: the typed reason first, so a person can quote it to the
 * operator, then one plain sentence. The provider's own error text is left out (it can be long,
 * and it is for the operator's log, not for the chat).
 */
export function failureReply(reason: string): string {
  const known = /^[a-z_]{1,64}$/.test(reason) ? reason : "unknown";
  const sentence = Object.hasOwn(FAILURE_SENTENCES, known) ? FAILURE_SENTENCES[known] : "Something went wrong while answering; try again.";
  return `[reason: ${known}] ${sentence}`;
}

/**
 * The answer to a message whose turn was under way when the gateway stopped without finishing it
 * (a crash): the turn is not run again, since it may have done part of its work already.
 */
export function interruptedReply(): string {
  return "[reason: runtime_offline] The bot restarted while answering this message; please send it again.";
}

/** The typing indicator for `chat` (and its topic). */
export function typingAction(chat: TelegramChat): { chat_id: number; action: "typing"; message_thread_id?: number } {
  return { ...replyTarget(chat), action: "typing" };
}
