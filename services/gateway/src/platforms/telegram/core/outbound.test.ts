import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type FormattedText,
  failureReply,
  formatReply,
  planReply,
  splitFormatted,
  TELEGRAM_TEXT_LIMIT,
  type TelegramEntity,
  typingAction,
} from "./outbound.js";

const plain = (text: string): FormattedText => ({ text, entities: [] });

function entityText(f: FormattedText, e: TelegramEntity): string {
  return f.text.slice(e.offset, e.offset + e.length);
}

describe("formatting: plain text with entities, never parse_mode", () => {
  it("Markdown-breaking characters pass through untouched", () => {
    const text = "a_b *c* [d](e) ~f~ `g h.i! #j +k -l =m |n {o} >p";
    expect(formatReply("a_b *c* [d](e) ~f~ `g h.i! #j +k -l =m |n {o} >p")).toEqual({ text, entities: [] });
  });

  it("inline code and bold become entities, their markers go", () => {
    const f = formatReply("run `npm test` and **do not** skip it");
    expect(f.text).toBe("run npm test and do not skip it");
    expect(f.entities).toEqual([
      { type: "code", offset: 4, length: 8 },
      { type: "bold", offset: 17, length: 6 },
    ]);
    expect(f.entities.map((e) => entityText(f, e))).toEqual(["npm test", "do not"]);
  });

  it("a fenced block becomes pre with its language", () => {
    const f = formatReply("Fix:\n```ts\nconst a = `x`;\n**not bold**\n```\nDone.");
    expect(f.text).toBe("Fix:\nconst a = `x`;\n**not bold**\nDone.");
    expect(f.entities).toEqual([{ type: "pre", offset: 5, length: 27, language: "ts" }]);
    expect(entityText(f, f.entities[0]!)).toBe("const a = `x`;\n**not bold**");
  });

  it("offsets count UTF-16 units, as Telegram does", () => {
    const f = formatReply("🤖 `x` 🤖 **y**");
    expect(f.entities).toEqual([
      { type: "code", offset: 3, length: 1 },
      { type: "bold", offset: 8, length: 1 },
    ]);
  });

  it("unclosed or empty markers stay literal", () => {
    for (const text of ["```\nno end", "`open", "** spaced **", "****", "a ` b", "``"]) expect(formatReply(text)).toEqual(plain(text));
  });
});

describe("splitting over 4,096 characters", () => {
  it("a short reply is one message", () => {
    expect(splitFormatted(plain("hello"))).toEqual([plain("hello")]);
    expect(splitFormatted(plain("x".repeat(TELEGRAM_TEXT_LIMIT)))).toHaveLength(1);
  });

  it("5,000 characters of paragraphs become two messages, cut at a paragraph", () => {
    const para = `${"word ".repeat(99)}end.`; // 499 characters
    const text = Array.from({ length: 10 }, () => para).join("\n\n");
    const chunks = splitFormatted(plain(text));
    expect(chunks).toHaveLength(2);
    expect(chunks.every((c) => c.text.length <= TELEGRAM_TEXT_LIMIT)).toBe(true);
    expect(chunks[0]!.text.endsWith("end.")).toBe(true);
    expect(chunks[1]!.text.startsWith("word")).toBe(true);
    expect(chunks.map((c) => c.text).join("\n\n")).toBe(text);
  });

  it("prefers a paragraph, then a line, then a space, then a hard cut", () => {
    expect(splitFormatted(plain("aaaa\n\nbb\ncc dd"), 10).map((c) => c.text)).toEqual(["aaaa", "bb\ncc dd"]);
    expect(splitFormatted(plain("aaaa bb\ncccccc"), 10).map((c) => c.text)).toEqual(["aaaa bb", "cccccc"]);
    expect(splitFormatted(plain("aaaa bbbb cccc"), 10).map((c) => c.text)).toEqual(["aaaa bbbb", "cccc"]);
    expect(splitFormatted(plain("abcdefghijklmno"), 10).map((c) => c.text)).toEqual(["abcdefghij", "klmno"]);
  });

  it("never splits a surrogate pair", () => {
    const chunks = splitFormatted(plain("🤖".repeat(7)), 5);
    expect(chunks.map((c) => c.text)).toEqual(["🤖🤖", "🤖🤖", "🤖🤖", "🤖"]);
  });

  it("never splits a grapheme: joined emoji, flags, skin tones, combining accents", () => {
    const family = "👩‍👩‍👧‍👦"; // 11 UTF-16 units, one character on screen
    expect(splitFormatted(plain(family.repeat(3)), 15).map((c) => c.text)).toEqual([family, family, family]);
    expect(splitFormatted(plain("🇫🇷🇩🇪🇯🇵"), 6).map((c) => c.text)).toEqual(["🇫🇷", "🇩🇪", "🇯🇵"]);
    expect(splitFormatted(plain("👍🏽".repeat(3)), 6).map((c) => c.text)).toEqual(["👍🏽", "👍🏽", "👍🏽"]);
    expect(splitFormatted(plain("e\u0301".repeat(3)), 3).map((c) => c.text)).toEqual(["e\u0301", "e\u0301", "e\u0301"]);
    // A space carrying a combining mark is one character: no cut there.
    expect(splitFormatted(plain("abc \u0301def"), 6).map((c) => c.text)).toEqual(["abc \u0301d", "ef"]);
  });

  it("at Telegram's limit: non-ASCII text without breaks fills messages of 4,096 units, whole characters only", () => {
    const cyrillic = splitFormatted(plain("я".repeat(5000)));
    expect(cyrillic.map((c) => c.text.length)).toEqual([4096, 904]);
    const thumbs = splitFormatted(plain(`a${"👍🏽".repeat(2000)}`));
    expect(thumbs.map((c) => c.text.length)).toEqual([4093, 3908]);
    expect(thumbs[0]!.text.endsWith("👍🏽")).toBe(true);
    expect(thumbs[1]!.text).toBe("👍🏽".repeat(977));
  });

  it("one character longer than a message is cut between code points, never inside a surrogate pair", () => {
    expect(splitFormatted(plain(`a${"\u0301".repeat(9)}`), 4).map((c) => c.text)).toEqual([
      "a\u0301\u0301\u0301",
      "\u0301".repeat(4),
      "\u0301\u0301",
    ]);
    expect(splitFormatted(plain("👩‍👩‍👧‍👦"), 4).map((c) => c.text)).toEqual(["👩\u200d", "👩\u200d", "👧\u200d", "👦"]);
  });

  it("prefers a break outside an entity, and an entity that must be cut continues in the next message", () => {
    const f = formatReply("intro\n\n```\nline one\nline two\nline three\n```");
    const chunks = splitFormatted(f, 20);
    expect(chunks.map((c) => c.text)).toEqual(["intro", "line one\nline two", "line three"]);
    expect(chunks.map((c) => c.entities)).toEqual([[], [{ type: "pre", offset: 0, length: 17 }], [{ type: "pre", offset: 0, length: 10 }]]);
  });

  it("leaves out white-space-only pieces; an empty reply sends nothing", () => {
    expect(splitFormatted(plain(""))).toEqual([]);
    expect(splitFormatted(plain("   \n\n  "))).toEqual([]);
  });

  it("for any text: chunks fit, keep every character but the separators, and entities stay inside their chunk", () => {
    const piece = fc.oneof(
      fc.string({ maxLength: 30 }),
      fc.constantFrom("\n", "\n\n", " ", "🤖", "`code`", "**b**", "\n```js\nx = 1\ny\n```\n"),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 60 }), fc.integer({ min: 2, max: 60 }), (pieces, limit) => {
        const f = formatReply(pieces.join(""));
        const chunks = splitFormatted(f, limit);
        const strip = (s: string) => s.replace(/\s/g, "");
        expect(strip(chunks.map((c) => c.text).join(""))).toBe(strip(f.text));
        for (const c of chunks) {
          expect(c.text.length).toBeLessThanOrEqual(limit);
          expect(c.text.trim().length).toBeGreaterThan(0);
          expect(/[\uD800-\uDBFF]$/.test(c.text)).toBe(false);
          expect(/^[\uDC00-\uDFFF]/.test(c.text)).toBe(false);
          for (const e of c.entities) {
            expect(e.length).toBeGreaterThan(0);
            expect(e.offset + e.length).toBeLessThanOrEqual(c.text.length);
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it("for any text: every cut falls between two graphemes of the reply", () => {
    const graphemes = (s: string) => [...new Intl.Segmenter(undefined, { granularity: "grapheme" }).segment(s)].map((g) => g.segment);
    const visible = (s: string) => graphemes(s).filter((g) => g.trim().length > 0);
    const piece = fc.oneof(
      fc.string({ maxLength: 20, unit: "grapheme" }),
      fc.constantFrom("\n", " ", "👩‍👩‍👧‍👦", "🇫🇷", "👍🏽", "e\u0301", " \u0301", "\r\n", "`code`"),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 60 }), fc.integer({ min: 12, max: 60 }), (pieces, limit) => {
        const f = formatReply(pieces.join(""));
        const chunks = splitFormatted(f, limit);
        expect(chunks.flatMap((c) => visible(c.text))).toEqual(visible(f.text));
      }),
      { numRuns: 300 },
    );
  });
});

describe("reply messages", () => {
  it("go to the same chat and topic, each chunk with its own entities", () => {
    const chat = { id: "-1001234567890", type: "supergroup" as const, topic_id: "7" };
    const reply = `${"a".repeat(4090)}\n\nSee \`x\`.`;
    expect(planReply(chat, reply)).toEqual([
      { chat_id: -1001234567890, message_thread_id: 7, text: "a".repeat(4090) },
      { chat_id: -1001234567890, message_thread_id: 7, text: "See x.", entities: [{ type: "code", offset: 4, length: 1 }] },
    ]);
  });

  it("outside a topic there is no message_thread_id; an empty reply is no message", () => {
    expect(planReply({ id: "42", type: "private" }, "hi")).toEqual([{ chat_id: 42, text: "hi" }]);
    expect(planReply({ id: "42", type: "private" }, " ")).toEqual([]);
  });

  it("the typing indicator goes to the topic too", () => {
    expect(typingAction({ id: "-100", type: "supergroup", topic_id: "3" })).toEqual({
      chat_id: -100,
      message_thread_id: 3,
      action: "typing",
    });
  });
});

describe("the failure reply", () => {
  it.each([
    ["provider_rate_limit", "[reason: provider_rate_limit] The model provider is rate limiting this bot; try again in a minute."],
    [
      "provider_auth_or_access",
      "[reason: provider_auth_or_access] The model provider refused this bot's credentials; its operator has to check the API key.",
    ],
    ["context_overflow", "[reason: context_overflow] This conversation no longer fits the model's context window."],
    ["unknown", "[reason: unknown] Something went wrong while answering; try again."],
    ["constructor", "[reason: constructor] Something went wrong while answering; try again."],
    ["Not A Reason <b>", "[reason: unknown] Something went wrong while answering; try again."],
  ])("%s", (reason, text) => {
    expect(failureReply(reason)).toBe(text);
    expect(failureReply(reason).length).toBeLessThan(200);
  });
});
