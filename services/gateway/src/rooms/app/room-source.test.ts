import { HermesError } from "@hermes/common";
import { describe, expect, it } from "vitest";
import { encodeTuples, type LogPage, type RoomEvent } from "../core/index.js";
import { joinWaitingPages, PageQueue } from "./room-source.js";

const ROOM = "room-1";

function event(seq: number, epoch = 1): RoomEvent {
  return {
    room_id: ROOM,
    seq,
    event_id: `e${seq}`,
    kind: "message.user",
    actor_json: "{}",
    epoch,
    payload_json: "{}",
    created_at: "2026-01-01T00:00:00.000Z",
    hash: `h${seq}`,
  };
}

/** A page of events from..to as an authority at `epoch` sends it (with the tuples a packed page keeps). */
function page(from: number, to: number, epoch = 1): LogPage {
  const events: RoomEvent[] = [];
  for (let seq = from; seq <= to; seq++) events.push(event(seq, epoch));
  return {
    room_id: ROOM,
    events,
    cursor: to,
    latest_seq: to,
    has_more: false,
    authority: { gateway_id: "gw", epoch },
    lineage: [{ epoch, gateway_id: "gw", start_seq: 1 }],
    prev: from === 1 ? null : { seq: from - 1, epoch, hash: `h${from - 1}` },
    tuples: encodeTuples(events),
  };
}

/** A transport the test feeds: pages (or a failure) become readable when pushed. */
function transport() {
  const queue: (LogPage | Error | null)[] = [];
  let wake: (() => void) | null = null;
  const push = (item: LogPage | Error | null) => {
    queue.push(item);
    wake?.();
    wake = null;
  };
  async function* pages(): AsyncIterable<LogPage> {
    for (;;) {
      while (queue.length === 0) await new Promise<void>((resolve) => (wake = resolve));
      const item = queue.shift()!;
      if (item === null) return;
      if (item instanceof Error) throw item;
      yield item;
    }
  }
  return { push, pages: pages() };
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));
const seqs = (p: LogPage) => p.events.map((e) => e.seq);

describe("joinWaitingPages", () => {
  it("hands a page over alone while the replica waits, and joins the pages that arrived while it was busy", async () => {
    const t = transport();
    const tail = joinWaitingPages(t.pages, 5000);
    const first = tail.next();
    t.push(page(1, 2));
    expect(seqs((await first).value as LogPage)).toEqual([1, 2]);
    // The replica applies page 1; meanwhile three pages arrive.
    t.push(page(3, 3));
    t.push(page(4, 5));
    t.push(page(6, 6));
    await settle();
    const joined = (await tail.next()).value as LogPage;
    expect(seqs(joined)).toEqual([3, 4, 5, 6]);
    expect(joined.prev).toEqual({ seq: 2, epoch: 1, hash: "h2" });
    expect(joined.cursor).toBe(6);
    expect(joined.tuples?.first_seq).toBe(3);
    expect(joined.tuples?.ends.length).toBe(4);
    expect(JSON.parse(`[${Buffer.from(joined.tuples!.body).toString("utf8")}]`).map((tuple: unknown[]) => tuple[0])).toEqual([3, 4, 5, 6]);
  });

  it("keeps apart pages of another authority, pages that do not continue, and pages over the limit", async () => {
    const t = transport();
    const tail = joinWaitingPages(t.pages, 3);
    t.push(page(1, 2));
    t.push(page(3, 3, 2)); // a new epoch: its own page
    t.push(page(5, 5, 2)); // a gap: the replica's planner must see it as sent
    t.push(page(6, 7, 2)); // continues 5: joined, 3 events
    t.push(page(8, 9, 2)); // 3 + 2 events would exceed the limit of 3
    t.push(null);
    await settle();
    const got: number[][] = [];
    for (let next = await tail.next(); !next.done; next = await tail.next()) got.push(seqs(next.value));
    expect(got).toEqual([[1, 2], [3], [5, 6, 7], [8, 9]]);
  });

  it("passes a transport failure on after the pages that came before it", async () => {
    const t = transport();
    const tail = joinWaitingPages(t.pages, 5000);
    t.push(page(1, 1));
    t.push(new HermesError("unavailable", "the authority went away"));
    await settle();
    expect(seqs((await tail.next()).value as LogPage)).toEqual([1]);
    await expect(tail.next()).rejects.toMatchObject({ reason: "unavailable" });
  });
});

describe("PageQueue", () => {
  it("joins what a transport pushed while the replica was busy, pausing the transport while too much waits", async () => {
    const flow: string[] = [];
    const queue = new PageQueue({ pause: () => flow.push("pause"), resume: () => flow.push("resume"), cancel: () => flow.push("cancel") });
    const tail = joinWaitingPages(queue, 5000);
    expect(tail).toBe(queue);
    const first = tail.next();
    queue.push(page(1, 1));
    expect(seqs((await first).value as LogPage)).toEqual([1]);
    for (let seq = 2; seq <= 65; seq++) queue.push(page(seq, seq));
    expect(flow).toEqual(["pause"]);
    const joined = (await tail.next()).value as LogPage;
    expect(seqs(joined)).toEqual(Array.from({ length: 64 }, (_, i) => i + 2));
    expect(flow).toEqual(["pause", "resume"]);
    queue.push(page(66, 66));
    queue.finish(new HermesError("unavailable", "the authority went away"));
    queue.push(page(67, 67)); // after the end: dropped
    expect(seqs((await tail.next()).value as LogPage)).toEqual([66]);
    await expect(tail.next()).rejects.toMatchObject({ reason: "unavailable" });
  });

  it("cancels the transport when the reader stops", async () => {
    const flow: string[] = [];
    const queue = new PageQueue({ pause: () => undefined, resume: () => undefined, cancel: () => flow.push("cancel") });
    queue.push(page(1, 1));
    await queue.return();
    expect(flow).toEqual(["cancel"]);
    expect((await queue.next()).done).toBe(true);
  });
});
