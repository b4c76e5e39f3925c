import { createHash } from "node:crypto";
import { ID_RULE } from "@hermes/contract";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalJson } from "./canonical-json.js";
import { ChainHasher, eventHash, eventHashOfCanonical, GENESIS_HASH, hashChains, verifyChain } from "./hash-chain.js";
import { sealEvent } from "./room-state.js";
import { EVENT_KINDS, type RoomEvent } from "./types.js";

function chain(count: number): RoomEvent[] {
  const events: RoomEvent[] = [];
  let prev = GENESIS_HASH;
  for (let seq = 1; seq <= count; seq++) {
    const event = sealEvent(
      {
        room_id: "r1",
        seq,
        event_id: `e${seq}`,
        kind: "message.user",
        actor_json: '{"id":"u1","kind":"user"}',
        epoch: 1,
        payload_json: JSON.stringify({ text: `message ${seq}` }),
        created_at: "2025-01-01T00:00:00.000Z",
      },
      prev,
    );
    events.push(event);
    prev = event.hash;
  }
  return events;
}

describe("eventHash", () => {
  it("is sha256(prev_hash ‖ canonical([seq, event_id, kind, actor, epoch, payload]))", () => {
    const fields = {
      seq: 2,
      event_id: "m1",
      kind: "message.user",
      actor_json: '{"kind":"user","id":"u1"}',
      epoch: 3,
      payload_json: '{"thread_id":"t","text":"hi"}',
    };
    const prev = "ab".repeat(32);
    const expected = createHash("sha256")
      .update(`${prev}[2,"m1","message.user",{"id":"u1","kind":"user"},3,{"text":"hi","thread_id":"t"}]`)
      .digest("hex");
    expect(eventHash(prev, fields)).toBe(expected);
    expect(eventHash(prev, fields)).toMatch(/^[0-9a-f]{64}$/);
  });

  it("writes seq and epoch as JSON.stringify does, whatever number they hold", () => {
    const prev = "cd".repeat(32);
    for (const n of [0, -0, 7, Number.MAX_SAFE_INTEGER, 2 ** 60, 1.5, -3, 1e21, Number.NaN, Number.POSITIVE_INFINITY]) {
      const fields = { seq: n, event_id: "m1", kind: "message.user", actor_json: "{}", epoch: n, payload_json: "{}" };
      const json = JSON.stringify(n);
      const expected = createHash("sha256").update(`${prev}[${json},"m1","message.user",{},${json},{}]`).digest("hex");
      expect(eventHashOfCanonical(prev, fields)).toBe(expected);
    }
  });

  it("ignores whitespace and key order in the stored JSON, but not the values", () => {
    const base = {
      seq: 1,
      event_id: "e",
      kind: "message.user",
      actor_json: '{"id":"u","kind":"user"}',
      epoch: 1,
      payload_json: '{"a":1,"b":2}',
    };
    const spaced = { ...base, actor_json: '{ "kind": "user", "id": "u" }', payload_json: '{ "b": 2, "a": 1 }' };
    expect(eventHash("", spaced)).toBe(eventHash("", base));
    expect(eventHash("", { ...base, payload_json: '{"a":1,"b":3}' })).not.toBe(eventHash("", base));
    expect(eventHash("", { ...base, epoch: 2 })).not.toBe(eventHash("", base));
    expect(eventHash("x", base)).not.toBe(eventHash("", base));
  });

  it("does not cover created_at (the appender's clock)", () => {
    const [event] = chain(1);
    expect(hashChains(GENESIS_HASH, { ...event!, created_at: "2030-01-01T00:00:00.000Z" })).toBe(true);
  });
});

describe("verifyChain", () => {
  it("accepts a dense chained log and returns its last hash", () => {
    const events = chain(5);
    expect(verifyChain(events, 0, GENESIS_HASH)).toEqual({ ok: true, last_hash: events[4]!.hash });
    expect(verifyChain(events.slice(2), 2, events[1]!.hash)).toEqual({ ok: true, last_hash: events[4]!.hash });
    expect(verifyChain([], 0, GENESIS_HASH)).toEqual({ ok: true, last_hash: GENESIS_HASH });
  });

  it("finds a gap", () => {
    const events = chain(4);
    expect(verifyChain([events[0]!, events[2]!], 0, GENESIS_HASH)).toMatchObject({ ok: false, seq: 3, problem: "gap" });
  });

  it("finds a tampered payload, a tampered hash and a wrong starting point", () => {
    const events = chain(4);
    const tampered = events.map((e) => ({ ...e }));
    tampered[2]!.payload_json = JSON.stringify({ text: "forged" });
    expect(verifyChain(tampered, 0, GENESIS_HASH)).toMatchObject({ ok: false, seq: 3, problem: "hash_mismatch" });
    const rehashed = events.map((e) => ({ ...e }));
    rehashed[1]!.hash = "0".repeat(64);
    expect(verifyChain(rehashed, 0, GENESIS_HASH)).toMatchObject({ ok: false, seq: 2, problem: "hash_mismatch" });
    expect(verifyChain(events.slice(1), 1, "f".repeat(64))).toMatchObject({ ok: false, seq: 2, problem: "hash_mismatch" });
  });

  it("treats unparsable JSON as a broken link, not a crash", () => {
    const [event] = chain(1);
    expect(hashChains(GENESIS_HASH, { ...event!, payload_json: "{not json" })).toBe(false);
  });
});

describe("ChainHasher", () => {
  it("hashes what eventHashOfCanonical hashes, one event after another from one buffer", () => {
    const ids = fc.stringMatching(new RegExp(ID_RULE));
    const fields = fc.record({
      seq: fc.maxSafeInteger(),
      event_id: ids,
      kind: fc.constantFrom(...EVENT_KINDS, "future.kind"),
      actor_json: fc.oneof(
        fc.constant('{"id":"u","kind":"user"}'),
        fc.string().map((id) => canonicalJson({ id, kind: "user" })),
      ),
      epoch: fc.nat(),
      text: fc.oneof(fc.string(), fc.string({ unit: "binary" }), fc.string({ unit: "grapheme" }), fc.constant("x".repeat(5000))),
    });
    const hasher = new ChainHasher();
    fc.assert(
      fc.property(
        fc.oneof(fc.constant(GENESIS_HASH), fc.stringMatching(/^[0-9a-f]{64}$/)),
        fc.array(fields, { minLength: 1, maxLength: 8 }),
        (prev, events) => {
          let prevHash = prev;
          for (const { text, ...rest } of events) {
            const event = { ...rest, payload_json: canonicalJson({ text }) };
            const plain = event.payload_json === `{"text":"${text}"}` ? text : undefined;
            const expected = eventHashOfCanonical(prevHash, event);
            expect(hasher.hash(prevHash, event, plain)).toBe(expected);
            expect(hasher.hash(prevHash, event)).toBe(expected);
            prevHash = expected;
          }
        },
      ),
    );
  });
});
