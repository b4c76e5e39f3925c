import { fsync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { credentials } from "@grpc/grpc-js";
import { authMetadata, fromServiceError } from "@hermes/common";
import { type MemberTurnReply, RoomMemberServiceClient } from "@hermes/proto/hermes/v1/rooms";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import type { SyncFile } from "../../src/home/store/gateway-store.js";
import { botChat, createBot, transcript } from "../support/delivery-fixtures.js";
import { memberTurnRequest } from "../support/discussion-fixtures.js";
import { startTestGateway, TEST_KEY, type TestGateway } from "../support/gateway-harness.js";

/**
 * A transcript write is reported only after the fsync of its profile database's -wal file: with
 * that fsync held, a chat turn does not answer, a delivery does not settle in state.db, and a
 * completion notification is not recorded as written, a room member turn does not answer — until
 * it is let go.
 */

/** The fsyncs of profile -wal files the gateway asked for and that are not let go yet. */
const held: { file: string; release: () => void }[] = [];

const holdingSync: SyncFile = (fd, done) => {
  held.push({ file: readlinkSync(`/proc/self/fd/${fd}`), release: () => fsync(fd, done) });
};

let t: TestGateway;

beforeAll(async () => {
  t = await startTestGateway({ syncFile: holdingSync });
  createBot(t, "alice");
  createBot(t, "bob");
});
afterAll(async () => {
  for (const sync of held.splice(0)) sync.release();
  await t?.destroy();
});

/** Waits for the held fsync of `profile`'s -wal file, and takes it off the list. */
async function heldFor(profile: string): Promise<{ release: () => void }> {
  const file = join(t.home, "profiles", profile, "state.db-wal");
  const index = await eventually(() => {
    const i = held.findIndex((s) => s.file === file);
    return i >= 0 ? i : false;
  });
  return held.splice(index, 1)[0]!;
}

function outbox(deliveryId: string): { state: string; notified_at: string | null } {
  const db = new Database(join(t.home, "state.db"), { readonly: true });
  try {
    return db.prepare("SELECT state, notified_at FROM delivery_outbox WHERE delivery_id = ?").get(deliveryId) as {
      state: string;
      notified_at: string | null;
    };
  } finally {
    db.close();
  }
}

/** True while `p` has not settled, after the event loop had a few turns. */
async function stillPending(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void p.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  return !settled;
}

describe("transcript durability", () => {
  it("answers a chat turn only once its messages are on disk", async () => {
    const turn = t.gateway.chat.turn({ profile: "alice", text: "hello" });
    const sync = await heldFor("alice");
    // Committed (a reader sees it) but not yet known to be on disk: the turn has not answered.
    expect(botChat(t, "alice").map((m) => m.content)).toContain("hello");
    expect(await stillPending(turn)).toBe(true);
    sync.release();
    await expect(turn).resolves.toMatchObject({ profile: "alice" });
  });

  it("settles a delivery after the target's turn is on disk, and records the notification after it is", async () => {
    const ack = await t.gateway.deliveries.send("alice", "bob", "please review PR 7", {});
    const wait = t.gateway.deliveries.wait(ack.delivery_id);
    const turn = await heldFor("bob");
    expect(await stillPending(wait)).toBe(true);
    expect(outbox(ack.delivery_id).state).not.toBe("settled");
    turn.release();
    await expect(wait).resolves.toMatchObject({ state: "settled" });
    // The notification in alice's Bot Chat is committed, its fsync held: not recorded as written.
    const note = await heldFor("alice");
    expect(botChat(t, "alice").some((m) => m.role === "notification")).toBe(true);
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(outbox(ack.delivery_id).notified_at).toBeNull();
    note.release();
    await eventually(() => expect(outbox(ack.delivery_id).notified_at).not.toBeNull());
  });

  it("answers a room member turn only once the member's messages are on disk", async () => {
    const bob = { member_id: "bob", profile: "bob" };
    const request = memberTurnRequest({ member: bob, members: [{ member_id: "alice", profile: "alice" }, bob] });
    const client = new RoomMemberServiceClient(t.gateway.grpcAddress, credentials.createInsecure());
    const reply = new Promise<MemberTurnReply>((resolve, reject) => {
      client.runMemberTurn(request, authMetadata(TEST_KEY), (err, answer) => {
        client.close();
        if (err) reject(fromServiceError(err));
        else resolve(answer);
      });
    });
    const sync = await heldFor("bob");
    expect(await stillPending(reply)).toBe(true);
    sync.release();
    const answer = await reply;
    expect(answer).toMatchObject({ turn_id: request.turn_id });
    expect(transcript(t, "bob", answer.session_id).map((m) => m.role)).toEqual(["user", "assistant"]);
  });
});
