import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalJson } from "./canonical-json.js";
import { MAX_ID_CHARS, MAX_NAME_CHARS, MAX_PAYLOAD_BYTES, MAX_TEXT_BYTES } from "./limits.js";
import {
  checkActor,
  checkId,
  checkLogRead,
  checkMembers,
  checkPayload,
  checkRoomName,
  checkSendParams,
  unescapedMessageText,
} from "./validation.js";

const reasonOf = (checked: { ok: boolean; refusal?: { reason: string } }) => (checked.ok ? "ok" : checked.refusal!.reason);
const members = (n: number) => Array.from({ length: n }, (_, i) => ({ member_id: `m${i}`, profile: `p${i}` }));

describe("ids", () => {
  it.each([
    ["a", "ok"],
    ["user:3f9c.x_y-z@host", "ok"],
    ["a".repeat(MAX_ID_CHARS), "ok"],
    ["a".repeat(MAX_ID_CHARS + 1), "invalid_params"],
    ["", "invalid_params"],
    ["-leading", "invalid_params"],
    ["has space", "invalid_params"],
    ["../etc", "invalid_params"],
    ["slash/inside", "invalid_params"],
    ["ümlaut", "invalid_params"],
  ])("%j → %s", (id, expected) => {
    expect(reasonOf(checkId(id, "room_id"))).toBe(expected);
  });

  it("refuses non-strings and names the field and limit", () => {
    expect(reasonOf(checkId(42, "event_id"))).toBe("invalid_params");
    const long = checkId("a".repeat(200), "event_id");
    expect(long.ok ? null : long.refusal.data).toEqual({ field: "event_id", limit: MAX_ID_CHARS, actual: 200 });
  });
});

describe("room names", () => {
  it("counts code points, so 200 emoji are allowed and 201 are not", () => {
    expect(reasonOf(checkRoomName("😀".repeat(MAX_NAME_CHARS)))).toBe("ok");
    expect(reasonOf(checkRoomName("😀".repeat(MAX_NAME_CHARS + 1)))).toBe("invalid_params");
  });

  it.each([
    ["Design review", "ok"],
    ["", "invalid_params"],
    ["   ", "invalid_params"],
    ["tab\there", "invalid_params"],
    ["bell\u0007", "invalid_params"],
    [null, "invalid_params"],
  ])("%j → %s", (name, expected) => {
    expect(reasonOf(checkRoomName(name))).toBe(expected);
  });
});

describe("members", () => {
  it.each([
    [1, "invalid_params"],
    [2, "ok"],
    [6, "ok"],
    [7, "invalid_params"],
  ])("%i members → %s", (n, expected) => {
    expect(reasonOf(checkMembers(members(n)))).toBe(expected);
  });

  it("refuses duplicates, bad ids, unknown fields and non-lists", () => {
    expect(reasonOf(checkMembers([...members(2), { member_id: "m0", profile: "x" }]))).toBe("invalid_params");
    expect(reasonOf(checkMembers([{ member_id: "a b", profile: "p" }, ...members(1)]))).toBe("invalid_params");
    expect(reasonOf(checkMembers([{ member_id: "a", profile: "p", admin: true }, ...members(1)]))).toBe("invalid_params");
    expect(reasonOf(checkMembers("ann,bob"))).toBe("invalid_params");
  });
});

describe("payloads", () => {
  it("measures text in UTF-8 bytes: 64 KiB of ASCII passes, one more byte does not", () => {
    expect(reasonOf(checkPayload("message.user", { text: "a".repeat(MAX_TEXT_BYTES) }))).toBe("ok");
    expect(reasonOf(checkPayload("message.user", { text: "a".repeat(MAX_TEXT_BYTES + 1) }))).toBe("payload_too_large");
    // 3 bytes each: 21,846 snowmen are 65,538 bytes though only 21,846 characters.
    const snowmen = checkPayload("message.user", { text: "☃".repeat(21_846) });
    expect(snowmen.ok ? null : snowmen.refusal.data).toEqual({ field: "payload.text", limit: MAX_TEXT_BYTES, actual: 65_538 });
  });

  it("a client message is exactly {text, thread_id?}", () => {
    expect(checkPayload("message.user", { thread_id: "t1", text: "hi" })).toEqual({ ok: true, value: '{"text":"hi","thread_id":"t1"}' });
    expect(reasonOf(checkPayload("message.user", { text: "hi", extra: 1 }))).toBe("invalid_params");
    expect(reasonOf(checkPayload("message.user", { text: "" }))).toBe("invalid_params");
    expect(reasonOf(checkPayload("message.user", { text: 5 }))).toBe("invalid_params");
    expect(reasonOf(checkPayload("message.user", { text: "hi", thread_id: "bad id" }))).toBe("invalid_params");
    expect(reasonOf(checkPayload("message.user", ["hi"]))).toBe("invalid_params");
    expect(reasonOf(checkPayload("message.user", null))).toBe("invalid_params");
  });

  it("bounds a whole payload at 256 KiB of canonical JSON", () => {
    const chunk = "a".repeat(60_000);
    const fits = { a: chunk, b: chunk, c: chunk, d: chunk };
    expect(reasonOf(checkPayload("turn.settled", fits))).toBe("ok");
    const over = { ...fits, e: "a".repeat(MAX_PAYLOAD_BYTES - 240_000) };
    expect(reasonOf(checkPayload("turn.settled", over))).toBe("payload_too_large");
  });

  it("checks the fields of room events and refuses values JSON cannot hold", () => {
    expect(reasonOf(checkPayload("room.renamed", { name: "New" }))).toBe("ok");
    expect(reasonOf(checkPayload("room.renamed", { name: "" }))).toBe("invalid_params");
    expect(reasonOf(checkPayload("room.members_changed", { members: members(7) }))).toBe("invalid_params");
    expect(reasonOf(checkPayload("turn.failed", { reason_code: "x", at: Number.NaN }))).toBe("invalid_params");
  });
});

describe("actors", () => {
  it("requires the actor kind each event kind is written by", () => {
    expect(reasonOf(checkActor("message.user", { kind: "user", id: "u1" }))).toBe("ok");
    expect(reasonOf(checkActor("message.user", { kind: "system", id: "x" }))).toBe("invalid_params");
    expect(reasonOf(checkActor("message.member", { kind: "member", id: "bot" }))).toBe("ok");
    expect(reasonOf(checkActor("turn.started", { kind: "gateway", id: "gw-1" }))).toBe("ok");
    expect(reasonOf(checkActor("room.renamed", { kind: "user", id: "u1" }))).toBe("invalid_params");
    expect(reasonOf(checkActor("message.user", { kind: "user", id: "u1", role: "admin" }))).toBe("invalid_params");
  });
});

describe("groups.send params", () => {
  it("accepts the documented shape", () => {
    const checked = checkSendParams({ room_id: "r1", event_id: "e1", payload: { text: "hi" }, expected_latest_seq: 4 });
    expect(checked).toEqual({ ok: true, value: { room_id: "r1", event_id: "e1", payload: { text: "hi" }, expected_latest_seq: 4 } });
  });

  it.each([
    [{ room_id: "r1", event_id: "e1" }, "payload"],
    [{ room_id: "r1", event_id: "e1", payload: { text: "hi" }, actor: { kind: "system" } }, "params"],
    [{ room_id: "r1", event_id: "e1", payload: { text: "hi" }, expected_latest_seq: -1 }, "expected_latest_seq"],
    [{ room_id: "r 1", event_id: "e1", payload: { text: "hi" } }, "room_id"],
    [{ room_id: "r1", event_id: "e1", payload: { text: "x".repeat(MAX_TEXT_BYTES + 1) } }, "payload.text"],
    [{ room_id: "r1", event_id: "system:room-disbanded", payload: { text: "hi" } }, "event_id"],
    [{ room_id: "r1", event_id: "turn:t:started", payload: { text: "hi" } }, "event_id"],
    [{ room_id: "r1", event_id: `repost:${"0".repeat(40)}`, payload: { text: "hi" } }, "event_id"],
  ])("refuses %j (field %s)", (raw, field) => {
    const checked = checkSendParams(raw);
    expect(checked.ok).toBe(false);
    if (!checked.ok) expect(checked.refusal.data.field).toBe(field);
  });
});

describe("groups.log bounds", () => {
  it.each([
    [{ since_seq: 0, limit: 1, max_bytes: 1024 }, "ok"],
    [{ since_seq: 0, limit: 500, max_bytes: 2 * 1024 * 1024 }, "ok"],
    [{ since_seq: 0, limit: 0, max_bytes: 1024 }, "invalid_params"],
    [{ since_seq: 0, limit: 501, max_bytes: 1024 }, "invalid_params"],
    [{ since_seq: -1, limit: 10, max_bytes: 1024 }, "invalid_params"],
    [{ since_seq: 1.5, limit: 10, max_bytes: 1024 }, "invalid_params"],
    [{ since_seq: 0, limit: 10, max_bytes: 100 }, "invalid_params"],
    [{ since_seq: 0, limit: 10, max_bytes: 6 * 1024 * 1024 }, "ok"],
    [{ since_seq: 0, limit: 10, max_bytes: 6 * 1024 * 1024 + 1 }, "invalid_params"],
  ])("%j → %s", (read, expected) => {
    expect(reasonOf(checkLogRead(read))).toBe(expected);
  });

  it("allows replication pages of up to 5000 events when asked", () => {
    expect(reasonOf(checkLogRead({ since_seq: 0, limit: 5000, max_bytes: 1024 }, 5000))).toBe("ok");
    expect(reasonOf(checkLogRead({ since_seq: 0, limit: 5001, max_bytes: 1024 }, 5000))).toBe("invalid_params");
  });
});

describe("fast paths", () => {
  it("writes a message payload exactly as canonicalJson does", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "binary", maxLength: 200 }),
        fc.option(fc.constantFrom("t1", "thread-2"), { nil: undefined }),
        (text, thread) => {
          const payload = thread === undefined ? { text } : { thread_id: thread, text };
          const checked = checkPayload("message.user", payload);
          if (text.length === 0) expect(checked.ok).toBe(false);
          else expect(checked).toEqual({ ok: true, value: canonicalJson(payload) });
        },
      ),
    );
  });

  it("refuses a text whose escaped JSON exceeds the payload limit", () => {
    expect(reasonOf(checkPayload("message.user", { text: "\u0001".repeat(60 * 1024) }))).toBe("payload_too_large");
  });

  it("gives well-formed sends and sends zod must explain the same answers", () => {
    const good = { room_id: "r", event_id: "e", payload: { text: "hi" } };
    expect(checkSendParams(good)).toEqual({ ok: true, value: good });
    expect(reasonOf(checkSendParams({ ...good, extra: 1 }))).toBe("invalid_params");
    expect(reasonOf(checkSendParams({ ...good, payload: { text: "hi", x: 1 } }))).toBe("invalid_params");
    expect(reasonOf(checkSendParams({ ...good, expected_latest_seq: -1 }))).toBe("invalid_params");
    expect(reasonOf(checkSendParams({ ...good, expected_latest_seq: 1.5 }))).toBe("invalid_params");
  });

  it("caches an accepted actor's canonical JSON per kind", () => {
    const actor = { kind: "user", id: "u" };
    expect(checkActor("message.user", actor)).toEqual({ ok: true, value: '{"id":"u","kind":"user"}' });
    expect(checkActor("message.user", actor)).toEqual({ ok: true, value: '{"id":"u","kind":"user"}' });
    expect(reasonOf(checkActor("message.member", actor))).toBe("invalid_params");
  });
});

describe("message payload JSON", () => {
  it("is {text} as canonicalJson writes it, and its text is known unescaped exactly when it is written as it is", () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string({ minLength: 1 }), fc.string({ unit: "binary", minLength: 1 }), fc.string({ unit: "grapheme", minLength: 1 })),
        fc.option(fc.constantFrom("t", "thread-1"), { nil: undefined }),
        (text, thread_id) => {
          const payload = thread_id === undefined ? { text } : { text, thread_id };
          const checked = checkPayload("message.user", payload);
          expect(checked.ok).toBe(true);
          if (!checked.ok) return;
          expect(checked.value).toBe(canonicalJson(payload));
          const unescaped = unescapedMessageText("message.user", payload, checked.value);
          if (thread_id !== undefined || checked.value !== `{"text":"${text}"}`) expect(unescaped).toBeUndefined();
          else expect(unescaped).toBe(text);
          expect(unescapedMessageText("message.member", payload, checked.value)).toBeUndefined();
        },
      ),
    );
    for (const text of ['a"b', "a\\b", "\u0000", "\u001f", "\ud800", "x\udfff", "😀", "\u2028", "\u007f\u0080 ~"]) {
      expect(checkPayload("message.user", { text })).toEqual({ ok: true, value: `{"text":${JSON.stringify(text)}}` });
    }
  });
});
