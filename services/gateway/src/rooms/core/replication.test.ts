import { describe, expect, it } from "vitest";
import { SimGateway } from "../../../test/support/rooms/sim-gateway.js";
import { planReplication } from "./replication.js";
import { AUTHORITY_CONTROL_ACTOR, isCaughtUp, newReplicaState, nextServerEvent, replicaStateView, sealEvent } from "./room-state.js";
import type { LocalLogLookup, LogPage } from "./types.js";

const NOW = "2025-01-01T00:00:00.000Z";
const MEMBERS = [
  { member_id: "ann", profile: "ann" },
  { member_id: "bob", profile: "bob" },
];
const nothingStored: LocalLogLookup = () => undefined;

/** Gateway A leads r1 with `messages` user messages after room.created. */
function authority(messages: number): SimGateway {
  const a = new SimGateway("A");
  a.create("r1", "Room", MEMBERS, NOW);
  for (let i = 0; i < messages; i++) {
    a.append(
      "r1",
      [{ origin: "client", event_id: `m${i}`, kind: "message.user", actor: { kind: "user", id: "u" }, payload: { text: `t${i}` } }],
      NOW,
    );
  }
  return a;
}

function pageOf(gateway: SimGateway, since = 0, limit = 100): LogPage {
  const served = gateway.log("r1", { since_seq: since, limit });
  if (!("page" in served)) throw new Error(served.refusal.message);
  return structuredClone(served.page);
}

describe("planReplication on a fresh replica", () => {
  it("applies the first page, adopts authority and lineage, and reports caught_up", () => {
    const fresh = newReplicaState("r1", "B", "A");
    expect(isCaughtUp(fresh)).toBe(false);
    const decision = planReplication(fresh, pageOf(authority(3)), nothingStored, NOW);
    expect(decision.kind).toBe("apply");
    if (decision.kind !== "apply") return;
    expect(decision.events.map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    expect(decision.caught_up).toBe(true);
    expect(decision.state).toMatchObject({
      role: "replica",
      authority: { gateway_id: "A", epoch: 1 },
      last_seq: 4,
      latest_seq: 4,
      max_epoch_seen: 1,
      lineage: [{ epoch: 1, gateway_id: "A", start_seq: 1 }],
      safety_status: "passive",
    });
    expect(replicaStateView(decision.state)).toEqual({
      room_id: "r1",
      authority: { gateway_id: "A", epoch: 1 },
      last_seq: 4,
      latest_seq: 4,
      caught_up: true,
      safety_status: "passive",
      safety_reason: null,
    });
  });
});

describe("planReplication refuses malformed pages", () => {
  const fresh = () => newReplicaState("r1", "B", "A");

  it("a page for another room is refused without quarantine", () => {
    const page = { ...pageOf(authority(1)), room_id: "r2" };
    const decision = planReplication(fresh(), page, nothingStored, NOW);
    expect(decision).toMatchObject({ kind: "refused", refusal: { reason: "invalid_params" }, fence: null });
  });

  it("an authority change without lineage evidence quarantines (lineage_mismatch)", () => {
    const page = pageOf(authority(1));
    page.authority = { gateway_id: "C", epoch: 2 };
    const decision = planReplication(fresh(), page, nothingStored, NOW);
    expect(decision).toMatchObject({ kind: "quarantined", refusal: { reason: "lineage_mismatch" } });
    if (decision.kind === "quarantined") {
      expect(decision.state.safety_status).toBe("quarantined");
      expect(decision.state.last_seq).toBe(0);
      expect(decision.refusal.message).toMatch(/authority change without lineage evidence/);
    }
  });

  it("an event stamped with an epoch its lineage does not give quarantines", () => {
    const page = pageOf(authority(2));
    page.events[2]!.epoch = 2;
    expect(planReplication(fresh(), page, nothingStored, NOW)).toMatchObject({
      kind: "quarantined",
      refusal: { reason: "lineage_mismatch" },
    });
  });

  it("a malformed lineage quarantines", () => {
    const page = pageOf(authority(2));
    page.lineage = [{ epoch: 1, gateway_id: "A", start_seq: 2 }];
    expect(planReplication(fresh(), page, nothingStored, NOW)).toMatchObject({
      kind: "quarantined",
      refusal: { reason: "lineage_mismatch" },
    });
  });

  it("a page naming this replica as the authority quarantines", () => {
    const page = pageOf(authority(1));
    page.authority = { gateway_id: "B", epoch: 1 };
    page.lineage = [{ epoch: 1, gateway_id: "B", start_seq: 1 }];
    expect(planReplication(fresh(), page, nothingStored, NOW)).toMatchObject({
      kind: "quarantined",
      refusal: { reason: "lineage_mismatch" },
    });
  });

  it("a hole inside the page is a gap", () => {
    const page = pageOf(authority(3));
    page.events.splice(2, 1);
    expect(planReplication(fresh(), page, nothingStored, NOW)).toMatchObject({ kind: "quarantined", refusal: { reason: "replica_gap" } });
  });

  it("events after room.disbanded quarantine", () => {
    const a = authority(1);
    a.append(
      "r1",
      [{ origin: "server", event_id: "bye", kind: "room.disbanded", actor: { kind: "system", id: "room-control" }, payload: {} }],
      NOW,
    );
    const first = planReplication(fresh(), pageOf(a), nothingStored, NOW);
    expect(first.kind === "apply" && first.state.disbanded).toBe(true);
    if (first.kind !== "apply") return;
    // A well-chained event after the disband (a broken or hostile source): only the disband rule catches it.
    const disband = first.events[2]!;
    const after = sealEvent(
      {
        ...disband,
        seq: 4,
        event_id: "late",
        kind: "message.user",
        actor_json: '{"id":"u","kind":"user"}',
        payload_json: '{"text":"late"}',
      },
      disband.hash,
    );
    const page: LogPage = { ...pageOf(a, 3), events: [after], cursor: 4, latest_seq: 4 };
    const stored: LocalLogLookup = (seq) => {
      const e = first.events[seq - 1];
      return e && { event_id: e.event_id, epoch: e.epoch, hash: e.hash, kind: e.kind };
    };
    expect(planReplication(first.state, page, stored, NOW)).toMatchObject({ kind: "quarantined", refusal: { reason: "room_disbanded" } });
  });
});

describe("planReplication on a gateway that leads the room", () => {
  it("refuses and fences when the page shows a newer epoch", () => {
    const a = authority(1);
    const b = new SimGateway("B");
    b.replicate("r1", pageOf(a), "A", NOW);
    const promoted = b.promote("r1", true, undefined, NOW);
    expect(promoted.ok).toBe(true);
    const served = b.log("r1", { since_seq: 0 });
    if (!("page" in served)) throw new Error("no page");
    const decision = planReplication(a.room("r1").state, served.page, nothingStored, NOW);
    expect(decision).toMatchObject({
      kind: "refused",
      refusal: { reason: "authority_conflict", data: { authority: { gateway_id: "B", epoch: 2 } } },
      fence: { gateway_id: "B", epoch: 2 },
    });
    if (decision.kind === "refused")
      expect(decision.state).toMatchObject({ safety_status: "fenced", fenced_by: { gateway_id: "B", epoch: 2 } });
  });
});

describe("planReplication after a handover", () => {
  it("preserves an authority.lost marker an earlier version's demote appended, without raising an alarm", () => {
    const a = authority(1);
    const b = new SimGateway("B");
    b.replicate("r1", pageOf(a), "A", NOW);
    b.promote("r1", true, "planned-handover", NOW);
    b.append(
      "r1",
      [{ origin: "client", event_id: "m9", kind: "message.user", actor: { kind: "user", id: "u" }, payload: { text: "t" } }],
      NOW,
    );
    // What demote on A used to do: the marker at A's last_seq + 1, in A's old epoch, then follow B.
    const room = a.room("r1");
    const marker = nextServerEvent(
      room.state,
      {
        event_id: "system:authority-lost:2",
        kind: "authority.lost",
        actor: AUTHORITY_CONTROL_ACTOR,
        payload: { previous_gateway_id: "A", previous_epoch: 1, authority_gateway_id: "B", authority_epoch: 2, reason: "demoted" },
      },
      NOW,
    );
    const demoted = {
      ...room.state,
      role: "replica" as const,
      authority: { gateway_id: "B", epoch: 2 },
      last_seq: marker.seq,
      last_hash: marker.hash,
      latest_seq: 0,
      max_epoch_seen: 2,
    };
    const events = [...room.events, marker];
    const lookup: LocalLogLookup = (seq) => {
      const e = events[seq - 1];
      return e && { event_id: e.event_id, epoch: e.epoch, hash: e.hash, kind: e.kind };
    };
    const decision = planReplication(demoted, pageOf(b, 2), lookup, NOW);
    expect(decision).toMatchObject({
      kind: "diverged",
      divergence: { from_seq: 3, count: 1, markers_only: true, winning_gateway_id: "B" },
      moved: { from_seq: 3, to_seq: 3 },
      state: { last_seq: 4, safety_status: "passive", safety_reason: null },
    });
  });
});

describe("planReplication throughput", () => {
  it("verifies and applies pages of 500 events (prints a figure, never a gate)", () => {
    const a = new SimGateway("A");
    a.create("r1", "Room", MEMBERS, NOW);
    for (let batch = 0; batch < 20; batch++) {
      const requests = Array.from({ length: 500 }, (_, i) => ({
        origin: "client" as const,
        event_id: `m${batch}-${i}`,
        kind: "message.user",
        actor: { kind: "user" as const, id: "u" },
        payload: { text: "x".repeat(200) },
      }));
      a.append("r1", requests, NOW);
    }
    const pages: LogPage[] = [];
    for (let since = 0; since < 10_001; since += 500) pages.push(pageOf(a, since, 500));
    let best = Number.POSITIVE_INFINITY;
    for (let round = 0; round < 3; round++) {
      let state = newReplicaState("r1", "B", "A");
      const started = performance.now();
      for (const page of pages) {
        const decision = planReplication(state, page, nothingStored, NOW);
        if (decision.kind !== "apply") throw new Error(`unexpected ${decision.kind}`);
        state = decision.state;
      }
      best = Math.min(best, performance.now() - started);
      expect(state.last_seq).toBe(10_001);
    }
    console.info(`planReplication: 10,001 events in pages of 500: best ${best.toFixed(1)} ms = ${Math.round(10_001_000 / best)} events/s`);
  });
});
