import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Db, openDatabase } from "@hermes/common";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GATEWAY_MIGRATIONS } from "../../home/store/migrations/index.js";
import { purgeProfileState, rekeyProfileState } from "../../identity/store/identity-store.js";
import { newEnvelope, payloadFingerprint } from "../core/envelope.js";
import { claim, createRecord, settle } from "../core/receipt.js";
import type { IngressRow, OutboxRow } from "../core/rows.js";
import type { Route } from "../core/targets.js";
import { DeliveriesStore } from "./deliveries-store.js";

let dir: string;
let db: Db;
let store: DeliveriesStore;
const T0 = Date.UTC(2026, 0, 1);

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "hermes-deliveries-"));
  db = openDatabase(join(dir, "state.db"), { label: "test state.db", migrations: GATEWAY_MIGRATIONS });
  store = new DeliveriesStore(db);
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

let n = 0;
function outbox(from: string, route: Route, at = T0): OutboxRow {
  const env = newEnvelope(
    { from_profile: from, from_gateway: "gw1", target: route.target, message: "hi" },
    { now: at, newId: () => `dlv_${++n}` },
  );
  return {
    ...createRecord(env, at),
    from_profile: from,
    from_gateway: "gw1",
    sender_session_key: `agent:${from}:bot:dm:bot-chat`,
    route,
    target_profile: route.kind === "local" ? route.profile : null,
    message: env.message,
    fingerprint: payloadFingerprint(env),
    notified_at: null,
  };
}

function ingress(target: string, from = "alice@gw1", at = T0): IngressRow {
  const env = newEnvelope(
    { from_profile: from.split("@")[0]!, from_gateway: "gw1", target, message: "hi" },
    { now: at, newId: () => `dlv_${++n}` },
  );
  return {
    ...createRecord(env, at),
    sender_name: "Alice",
    target_profile: target,
    session_key: `agent:${target}:bot:dm:bot-chat`,
    source: "local",
    message: env.message,
    fingerprint: payloadFingerprint(env),
    claimed_at: null,
  };
}

const local = (profile: string): Route => ({ kind: "local", profile, target: profile });
const peer: Route = { kind: "peer", peer: "spark", profile: "bob", target: "spark/bob" };

describe("DeliveriesStore", () => {
  it("round-trips outbox and ingress rows, with the receipt fields the state machine changes", () => {
    const o = outbox("alice", local("bob"));
    store.insertOutbox(o);
    expect(store.outbox(o.delivery_id)).toEqual(o);
    const claimed = claim(o, T0 + 1000);
    store.saveOutbox(claimed);
    expect(store.outbox(o.delivery_id)).toMatchObject({ state: "claimed", attempts: 1 });

    const i = ingress("bob");
    store.insertIngress(i);
    expect(store.ingress(i.delivery_id)).toEqual(i);
    const c = claim(i, T0 + 1000);
    store.saveIngress(c, "2026-01-01T00:00:01.000Z");
    store.saveIngress(settle(c, "done", T0 + 2000));
    expect(store.ingress(i.delivery_id)).toMatchObject({ state: "settled", reply: "done", claimed_at: "2026-01-01T00:00:01.000Z" });
  });

  it("keeps a local route's profile only in target_profile (no profile name hides in route_json)", () => {
    const o = outbox("alice", local("bob"));
    store.insertOutbox(o);
    expect(db.prepare("SELECT route_json FROM delivery_outbox").pluck().get()).toBe(JSON.stringify({ kind: "local", target: "bob" }));
    const p = outbox("alice", peer);
    store.insertOutbox(p);
    expect(store.outbox(p.delivery_id)!.route).toEqual(peer);
  });

  it("finds open, unnotified and unclaimed rows for recovery and the TTL sweep", () => {
    const a = outbox("alice", local("bob"));
    const b = outbox("alice", peer);
    store.insertOutbox(a);
    store.insertOutbox(b);
    store.saveOutbox(settle(claim(a, T0), "ok", T0));
    expect(store.openOutbox().map((r) => r.delivery_id)).toEqual([b.delivery_id]);
    expect(store.unnotifiedOutbox().map((r) => r.delivery_id)).toEqual([a.delivery_id]);
    store.markNotified(a.delivery_id, "2026-01-01T00:00:00.000Z");
    expect(store.unnotifiedOutbox()).toEqual([]);
    // Local outbox rows expire through their ingress row, so only the peer one is a sweep candidate.
    expect(store.unclaimedQueued().outbox.map((r) => r.delivery_id)).toEqual([b.delivery_id]);
    const i = ingress("bob");
    store.insertIngress(i);
    expect(store.ingressIn("queued").map((r) => r.delivery_id)).toEqual([i.delivery_id]);
  });

  it("lists a local delivery once (as outbox) and received ones as ingress, filtered by profile and state", () => {
    const o = outbox("alice", local("bob"));
    store.insertOutbox(o);
    store.insertIngress({ ...ingress("bob"), delivery_id: o.delivery_id });
    const fromPeer = ingress("carol", "zoe@gw9", T0 + 5);
    store.insertIngress(fromPeer);
    expect(store.list().map((d) => [d.side, d.record.delivery_id])).toEqual([
      ["ingress", fromPeer.delivery_id],
      ["outbox", o.delivery_id],
    ]);
    expect(store.list({ profile: "bob" }).map((d) => d.side)).toEqual(["outbox"]);
    expect(store.list({ profile: "carol" }).map((d) => d.side)).toEqual(["ingress"]);
    expect(store.list({ state: "settled" })).toEqual([]);
    expect(store.list({ limit: 1 })).toHaveLength(1);
  });
});

describe("delivery tables in the identity registry", () => {
  it("a rename rekeys sender, sender Bot Chat and local target; remote profiles and qualified senders stay", () => {
    store.insertOutbox(outbox("bob", local("carol")));
    store.insertOutbox(outbox("alice", local("bob")));
    store.insertOutbox(outbox("alice", { kind: "peer", peer: "spark", profile: "bob", target: "spark/bob" }));
    store.insertIngress(ingress("bob", "alice@gw1"));
    store.insertIngress(ingress("carol", "bob@gw1"));
    const counts = rekeyProfileState(db, "bob", "robert");
    expect(counts).toMatchObject({ delivery_outbox: 2, delivery_ingress: 1 });
    const out = db
      .prepare("SELECT from_profile, sender_session_key, target, target_profile, route_json FROM delivery_outbox ORDER BY rowid")
      .all();
    expect(out).toEqual([
      {
        from_profile: "robert",
        sender_session_key: "agent:robert:bot:dm:bot-chat",
        target: "carol",
        target_profile: "carol",
        route_json: '{"kind":"local","target":"carol"}',
      },
      // The target text is what the sender addressed; the route follows the rename.
      {
        from_profile: "alice",
        sender_session_key: "agent:alice:bot:dm:bot-chat",
        target: "bob",
        target_profile: "robert",
        route_json: '{"kind":"local","target":"bob"}',
      },
      // A peer's bob is somebody else.
      {
        from_profile: "alice",
        sender_session_key: "agent:alice:bot:dm:bot-chat",
        target: "spark/bob",
        target_profile: null,
        route_json: JSON.stringify({ kind: "peer", peer: "spark", profile: "bob", target: "spark/bob" }),
      },
    ]);
    expect(db.prepare("SELECT sender, target_profile, session_key FROM delivery_ingress ORDER BY rowid").all()).toEqual([
      { sender: "alice@gw1", target_profile: "robert", session_key: "agent:robert:bot:dm:bot-chat" },
      { sender: "bob@gw1", target_profile: "carol", session_key: "agent:carol:bot:dm:bot-chat" },
    ]);
    expect(rekeyProfileState(db, "bob", "robert")).toEqual({});
  });

  it("the sender's Bot Chat key is read as stored now: after a rename, the new name's (what a notification is written to)", () => {
    const row = outbox("bob", local("carol"));
    store.insertOutbox(row);
    expect(store.senderSessionKey(row.delivery_id)).toBe("agent:bob:bot:dm:bot-chat");
    rekeyProfileState(db, "bob", "robert");
    expect(store.senderSessionKey(row.delivery_id)).toBe("agent:robert:bot:dm:bot-chat");
    expect(store.senderSessionKey("dlv_unknown")).toBeUndefined();
  });

  it("a delete purges what the profile sent and received, and keeps the receipts of the bots that wrote to it", () => {
    store.insertOutbox(outbox("bob", local("carol")));
    const toBob = outbox("alice", local("bob"));
    store.insertOutbox(toBob);
    store.insertOutbox(outbox("alice", local("carol")));
    store.insertIngress(ingress("bob"));
    store.insertIngress(ingress("carol"));
    expect(purgeProfileState(db, "bob")).toMatchObject({ delivery_outbox: 1, delivery_ingress: 1 });
    expect(db.prepare("SELECT from_profile, target_profile FROM delivery_outbox ORDER BY rowid").all()).toEqual([
      { from_profile: "alice", target_profile: "bob" },
      { from_profile: "alice", target_profile: "carol" },
    ]);
    expect(store.outbox(toBob.delivery_id)?.delivery_id).toBe(toBob.delivery_id);
    expect(db.prepare("SELECT target_profile FROM delivery_ingress").pluck().all()).toEqual(["carol"]);
  });
});
