import { describe, expect, it } from "vitest";
import { chatLog } from "../../../test/support/rooms/chat-log.js";
import { DEFAULT_LOG_LIMIT, DEFAULT_PAGE_MAX_BYTES, MAX_LOG_LIMIT, MAX_PAGE_MAX_BYTES, MIN_PAGE_MAX_BYTES } from "./limits.js";
import { buildLogPage, eventWireBytes, packedJsonWireBytes, planLogRead } from "./log-page.js";
import type { RoomEvent, RoomState } from "./types.js";
import type { LogRead } from "./validation.js";

const NOW = "2025-01-01T00:00:00.000Z";

function room(messages: number, text = (i: number) => `message ${i}`): { state: RoomState; events: RoomEvent[] } {
  return chatLog(
    "r1",
    Array.from({ length: messages }, (_, i) => text(i + 2)),
    NOW,
  );
}

/** What a store does: read prev and `limit` events after since_seq. */
function page(state: RoomState, events: RoomEvent[], read: LogRead) {
  const prev = read.since_seq > 0 ? events[read.since_seq - 1]! : null;
  return buildLogPage(state, read, prev, events.slice(read.since_seq, read.since_seq + read.limit));
}

describe("planLogRead", () => {
  it("applies the defaults", () => {
    const { state } = room(3);
    expect(planLogRead(state, {})).toEqual({
      ok: true,
      value: { since_seq: 0, limit: DEFAULT_LOG_LIMIT, max_bytes: DEFAULT_PAGE_MAX_BYTES },
    });
  });

  it("bounds limit to 1..500", () => {
    const { state } = room(3);
    expect(planLogRead(state, { limit: MAX_LOG_LIMIT }).ok).toBe(true);
    expect(planLogRead(state, { limit: MAX_LOG_LIMIT + 1 })).toMatchObject({ ok: false, refusal: { reason: "invalid_params" } });
    expect(planLogRead(state, { limit: 0 })).toMatchObject({ ok: false, refusal: { reason: "invalid_params" } });
    // A replication (packed) read may ask for up to 5000.
    expect(planLogRead(state, { limit: 5000 }, { maxLimit: 5000 }).ok).toBe(true);
  });

  it("lowers a valid max_bytes to the room an answer has left, never below the smallest page, and refuses an invalid one as alone", () => {
    const { state } = room(3);
    const maxBytes = (params: { max_bytes?: number }, answerBytes?: number) => {
      const read = planLogRead(state, params, { answerBytes });
      return read.ok ? read.value.max_bytes : read.refusal.reason;
    };
    const cases: [params: { max_bytes?: number }, answerBytes: number | undefined, expected: number | string][] = [
      [{}, undefined, DEFAULT_PAGE_MAX_BYTES],
      [{}, 100_000, 100_000 - 1024],
      [{ max_bytes: 5000 }, 100_000, 5000],
      [{ max_bytes: MAX_PAGE_MAX_BYTES }, MAX_PAGE_MAX_BYTES + 10_000, MAX_PAGE_MAX_BYTES],
      // No room left: the smallest page, which the batch then refuses as too large.
      [{}, 0, MIN_PAGE_MAX_BYTES],
      [{ max_bytes: 3000 }, 2500, 2500 - 1024],
      [{ max_bytes: 3000 }, 1500, MIN_PAGE_MAX_BYTES],
      [{ max_bytes: -5 }, 100_000, "invalid_params"],
      [{ max_bytes: MAX_PAGE_MAX_BYTES + 1 }, 100_000, "invalid_params"],
      [{ max_bytes: 0 }, undefined, "invalid_params"],
    ];
    for (const [params, answerBytes, expected] of cases)
      expect(maxBytes(params, answerBytes), JSON.stringify([params, answerBytes])).toBe(expected);
  });

  it("sizes an event like its JSON (the page byte budget's unit)", () => {
    const { events } = room(3);
    for (const event of events) expect(eventWireBytes(event)).toBe(Buffer.byteLength(JSON.stringify(event)));
  });

  it("sizes a packed event from its tuple JSON exactly like eventWireBytes", () => {
    const { events } = room(4, (i) => ["plain", 'quoted "x" \\ y', "ünï 😀 \u2028", "ctl \u0001\n"][i - 2]!);
    for (const e of events) {
      const json = JSON.stringify([e.seq, e.event_id, e.kind, e.actor_json, e.epoch, e.payload_json, e.created_at, e.hash]);
      expect(packedJsonWireBytes(e.room_id, Buffer.byteLength(json))).toBe(eventWireBytes(e));
    }
  });

  it("refuses since_seq beyond the log with cursor_conflict, telling where the log ends", () => {
    const { state } = room(3);
    expect(planLogRead(state, { since_seq: 4 }).ok).toBe(true);
    expect(planLogRead(state, { since_seq: 5 })).toMatchObject({
      ok: false,
      refusal: { reason: "cursor_conflict", data: { since_seq: 5, latest_seq: 4, authority: { gateway_id: "A", epoch: 1 } } },
    });
  });

  it("points every reader of a replica that knows a newer authority but not its lineage there, whatever the cursor", () => {
    const { state } = room(3);
    const demoted: RoomState = { ...state, role: "replica", authority: { gateway_id: "C", epoch: 2 }, max_epoch_seen: 2 };
    const redirect = { ok: false, refusal: { reason: "not_authority", data: { authority: { gateway_id: "C", epoch: 2 } } } };
    expect(planLogRead(demoted, { since_seq: 0 })).toMatchObject(redirect);
    // Beyond the end too: a cursor_conflict would only send the reader back here.
    expect(planLogRead(demoted, { since_seq: 9 })).toMatchObject(redirect);
    // Once its lineage shows the authority, it serves.
    const caughtUp = { ...demoted, lineage: [...demoted.lineage, { epoch: 2, gateway_id: "C", start_seq: 5 }] };
    expect(planLogRead(caughtUp, { since_seq: 0 }).ok).toBe(true);
  });
});

describe("buildLogPage", () => {
  it("pages by count with cursor, has_more, latest_seq, authority, lineage and prev", () => {
    const { state, events } = room(9);
    const first = page(state, events, { since_seq: 0, limit: 4, max_bytes: DEFAULT_PAGE_MAX_BYTES });
    expect(first.events.map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    expect(first).toMatchObject({
      room_id: "r1",
      cursor: 4,
      latest_seq: 10,
      has_more: true,
      prev: null,
      authority: { gateway_id: "A", epoch: 1 },
    });
    expect(first.lineage).toEqual([{ epoch: 1, gateway_id: "A", start_seq: 1 }]);
    const second = page(state, events, { since_seq: first.cursor, limit: 4, max_bytes: DEFAULT_PAGE_MAX_BYTES });
    expect(second.events.map((e) => e.seq)).toEqual([5, 6, 7, 8]);
    expect(second.prev).toEqual({ seq: 4, epoch: 1, hash: events[3]!.hash });
    const last = page(state, events, { since_seq: second.cursor, limit: 4, max_bytes: DEFAULT_PAGE_MAX_BYTES });
    expect(last.events.map((e) => e.seq)).toEqual([9, 10]);
    expect(last).toMatchObject({ cursor: 10, has_more: false });
    const empty = page(state, events, { since_seq: 10, limit: 4, max_bytes: DEFAULT_PAGE_MAX_BYTES });
    expect(empty).toMatchObject({ events: [], cursor: 10, has_more: false, prev: { seq: 10 } });
  });

  it("pages by bytes, but always returns at least one event", () => {
    const { state, events } = room(6, () => "x".repeat(3000));
    const size = eventWireBytes(events[1]!);
    const byBytes = page(state, events, { since_seq: 1, limit: 500, max_bytes: size * 2 + 10 });
    expect(byBytes.events.map((e) => e.seq)).toEqual([2, 3]);
    expect(byBytes.has_more).toBe(true);
    const tiny = page(state, events, { since_seq: 1, limit: 500, max_bytes: 1024 });
    expect(tiny.events.map((e) => e.seq)).toEqual([2]);
    const total = tiny.events.reduce((sum, e) => sum + eventWireBytes(e), 0);
    expect(total).toBeGreaterThan(1024);
  });

  it("keeps a full page of 500 small events under the default 2 MiB", () => {
    const { state, events } = room(600);
    const full = page(state, events, { since_seq: 0, limit: 500, max_bytes: DEFAULT_PAGE_MAX_BYTES });
    expect(full.events).toHaveLength(500);
    expect(full.events.reduce((sum, e) => sum + eventWireBytes(e), 0)).toBeLessThanOrEqual(DEFAULT_PAGE_MAX_BYTES);
  });

  it("fails loudly when the store hands over a log that is not dense or lacks prev", () => {
    const { state, events } = room(5);
    const read = { since_seq: 1, limit: 10, max_bytes: DEFAULT_PAGE_MAX_BYTES };
    expect(() => buildLogPage(state, read, events[0]!, [events[1]!, events[3]!])).toThrow(/not dense/);
    expect(() => buildLogPage(state, read, null, events.slice(1))).toThrow(/no event at seq 1/);
  });
});
