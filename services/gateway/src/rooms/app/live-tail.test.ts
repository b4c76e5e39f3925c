import { describe, expect, it } from "vitest";
import { encodeTuples, type LogPage, type PrevPointer, type RoomEvent, type RoomState, type TupleRun } from "../core/index.js";
import { type AnyPage, type PageSink, RoomChanges, TailSubscription } from "./live-tail.js";

const ROOM = "room-1";

function event(seq: number, hash = `h${seq}`): RoomEvent {
  return {
    room_id: ROOM,
    seq,
    event_id: `e${seq}`,
    kind: "message.user",
    actor_json: "{}",
    epoch: 1,
    payload_json: "{}",
    created_at: "2026-01-01T00:00:00.000Z",
    hash,
  };
}

/** A log the test appends to, read the way the rooms service reads it: `prev` from the caller or from the log. */
class FakeLog {
  events: RoomEvent[] = [];
  readonly prevsGiven: (PrevPointer | null)[] = [];
  storeReads = 0;

  read = (since: number, prev: PrevPointer | null): LogPage => {
    this.prevsGiven.push(prev);
    let at: PrevPointer | null = prev;
    if (since > 0 && prev === null) {
      this.storeReads++;
      const stored = this.events[since - 1]!;
      at = { seq: stored.seq, epoch: stored.epoch, hash: stored.hash };
    }
    const events = this.events.slice(since);
    const last = this.events.length;
    return {
      room_id: ROOM,
      events,
      cursor: events.at(-1)?.seq ?? since,
      latest_seq: last,
      has_more: false,
      authority: { gateway_id: "gw", epoch: 1 },
      lineage: [{ epoch: 1, gateway_id: "gw", start_seq: 1 }],
      prev: since === 0 ? null : at,
    };
  };
}

function collect(): { pages: AnyPage[]; sink: PageSink } {
  const pages: AnyPage[] = [];
  return {
    pages,
    sink: {
      send: (page) => {
        pages.push(page);
        return true;
      },
      drained: () => Promise.resolve(),
      end: () => undefined,
    },
  };
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("TailSubscription", () => {
  it("gives the last event it sent as the next page's prev, so the store is not read for it", async () => {
    const changes = new RoomChanges();
    const log = new FakeLog();
    log.events.push(event(1), event(2));
    const { pages, sink } = collect();
    const sub = new TailSubscription(changes, ROOM, 1, log.read, sink);
    await settle();
    expect(log.storeReads).toBe(1); // the handshake reads the event at since_seq
    for (const seq of [3, 4, 5]) {
      log.events.push(event(seq));
      changes.notify(ROOM);
      await settle();
    }
    expect(log.storeReads).toBe(1);
    expect(log.prevsGiven.slice(1)).toEqual([
      { seq: 2, epoch: 1, hash: "h2" },
      { seq: 3, epoch: 1, hash: "h3" },
      { seq: 4, epoch: 1, hash: "h4" },
    ]);
    expect(pages.map((p) => ("events" in p ? p.events.map((e) => e.seq) : []))).toEqual([[2], [3], [4], [5]]);
    sub.close();
  });

  it("reads prev from the store again once stored events were rewritten (a divergence), and the page shows the new hash", async () => {
    const changes = new RoomChanges();
    const log = new FakeLog();
    log.events.push(event(1), event(2));
    const { pages, sink } = collect();
    const sub = new TailSubscription(changes, ROOM, 0, log.read, sink);
    await settle();
    // The replica's branch at seq 2 is replaced by the winning one, and seq 3 follows it.
    log.events = [event(1), event(2, "h2-winner"), event(3)];
    changes.notify(ROOM, true);
    await settle();
    expect(log.prevsGiven.at(-1)).toBeNull();
    const last = pages.at(-1) as LogPage;
    expect(last.prev).toEqual({ seq: 2, epoch: 1, hash: "h2-winner" });
    expect(last.events.map((e) => e.seq)).toEqual([3]);
    // Appends after the rewrite reuse the last event sent again.
    log.events.push(event(4));
    changes.notify(ROOM);
    await settle();
    expect(log.prevsGiven.at(-1)).toEqual({ seq: 3, epoch: 1, hash: "h3" });
    sub.close();
  });
});

describe("TailSubscription of packed pages", () => {
  /** A packed page after `since` holding `run` as it is (as a page built from a commit's run holds it). */
  const packedPage = (since: number, prev: PrevPointer | null, run: TupleRun, last: number) => ({
    room_id: ROOM,
    packed: [run],
    cursor: last,
    latest_seq: last,
    has_more: false,
    authority: { gateway_id: "gw", epoch: 1 },
    lineage: [{ epoch: 1, gateway_id: "gw", start_seq: 1 }],
    prev: since === 0 ? null : prev,
  });

  it("takes the next prev from a commit whose own run the page holds, and decodes the page's last tuple otherwise", async () => {
    const changes = new RoomChanges();
    const prevs: (PrevPointer | null)[] = [];
    let run = encodeTuples([event(1), event(2)]);
    let last = 2;
    const { sink } = collect();
    const sub = new TailSubscription(
      changes,
      ROOM,
      0,
      (since, prev) => {
        prevs.push(prev);
        return packedPage(since, prev, run, last);
      },
      sink,
    );
    await settle();
    // Outside a notification of the page's own run: decoded from the last tuple.
    expect(prevs).toEqual([null]);
    // The commit's events say "h4-committed" while its run's bytes say "h4": the prev given next
    // shows which one the subscription took (a real commit's two agree).
    run = encodeTuples([event(3), event(4)]);
    last = 4;
    const state = { room_id: ROOM, last_seq: 4 } as unknown as RoomState;
    changes.notify(ROOM, false, { state, events: [event(3), event(4, "h4-committed")], run });
    await settle();
    expect(prevs.at(-1)).toEqual({ seq: 2, epoch: 1, hash: "h2" });
    run = encodeTuples([event(5)]);
    last = 5;
    changes.notify(ROOM);
    await settle();
    expect(prevs.at(-1)).toEqual({ seq: 4, epoch: 1, hash: "h4-committed" });
    // A page with a run that is not the commit's (another object, same events) is decoded.
    run = encodeTuples([event(6)]);
    last = 6;
    changes.notify(ROOM, false, { state: { ...state, last_seq: 6 }, events: [event(6, "h6-committed")], run: encodeTuples([event(6)]) });
    await settle();
    expect(prevs.at(-1)).toEqual({ seq: 5, epoch: 1, hash: "h5" });
    changes.notify(ROOM);
    await settle();
    expect(prevs.at(-1)).toEqual({ seq: 6, epoch: 1, hash: "h6" });
    sub.close();
  });
});

describe("RoomChanges.appendedAfter", () => {
  const state = (lastSeq: number) => ({ room_id: ROOM, last_seq: lastSeq }) as unknown as RoomState;

  it("hands the listeners of a commit its events after their cursor, and nothing outside the notification", () => {
    const changes = new RoomChanges();
    const stored = state(5);
    const seen: (readonly RoomEvent[] | null)[] = [];
    changes.on(ROOM, () => {
      seen.push(changes.appendedAfter(ROOM, stored, 3));
      seen.push(changes.appendedAfter(ROOM, stored, 1)); // event 2 is not in the commit: read the store
      seen.push(changes.appendedAfter(ROOM, state(5), 3)); // another stored state: read the store
      seen.push(changes.appendedAfter("room-2", stored, 3));
    });
    changes.notify(ROOM, false, { state: stored, events: [event(3), event(4), event(5)] });
    expect(seen.map((events) => events?.map((e) => e.seq) ?? null)).toEqual([[4, 5], null, null, null]);
    expect(changes.appendedAfter(ROOM, stored, 3)).toBeNull();
  });

  it("gives nothing for a commit that rewrote stored events, or whose events do not reach the room's last seq", () => {
    const changes = new RoomChanges();
    const seen: (readonly RoomEvent[] | null)[] = [];
    let stored = state(5);
    changes.on(ROOM, () => seen.push(changes.appendedAfter(ROOM, stored, 3)));
    changes.notify(ROOM, true, { state: stored, events: [event(4), event(5)] });
    stored = state(6);
    changes.notify(ROOM, false, { state: stored, events: [event(4), event(5)] });
    expect(seen).toEqual([null, null]);
  });
});

describe("RoomChanges.appendedRunAfter", () => {
  const state = (lastSeq: number) => ({ room_id: ROOM, last_seq: lastSeq }) as unknown as RoomState;
  const events = [event(3), event(4), event(5)];

  it("hands the listeners of a commit its stored run when it holds every event after their cursor, and nothing outside the notification", () => {
    const changes = new RoomChanges();
    const stored = state(5);
    const run = encodeTuples(events);
    const seen: (TupleRun | null)[] = [];
    changes.on(ROOM, () => {
      seen.push(changes.appendedRunAfter(ROOM, stored, 3)); // the run starts before the cursor: the page slices it
      seen.push(changes.appendedRunAfter(ROOM, stored, 2));
      seen.push(changes.appendedRunAfter(ROOM, stored, 1)); // event 2 is not in the commit: read the store
      seen.push(changes.appendedRunAfter(ROOM, state(5), 3)); // another stored state: read the store
      seen.push(changes.appendedRunAfter("room-2", stored, 3));
    });
    changes.notify(ROOM, false, { state: stored, events, run });
    expect(seen).toEqual([run, run, null, null, null]);
    expect(changes.appendedRunAfter(ROOM, stored, 3)).toBeNull();
  });

  it("gives nothing for a commit without a run, with a run of other events, that rewrote stored events, or that does not reach the last seq", () => {
    const changes = new RoomChanges();
    const seen: (TupleRun | null)[] = [];
    let stored = state(5);
    changes.on(ROOM, () => seen.push(changes.appendedRunAfter(ROOM, stored, 3)));
    changes.notify(ROOM, false, { state: stored, events });
    changes.notify(ROOM, false, { state: stored, events, run: encodeTuples(events.slice(1)) });
    changes.notify(ROOM, true, { state: stored, events, run: encodeTuples(events) });
    stored = state(6);
    changes.notify(ROOM, false, { state: stored, events, run: encodeTuples(events) });
    expect(seen).toEqual([null, null, null, null]);
  });
});
