import { describe, expect, it } from "vitest";
import { observeEpoch, planDemote, planPromote } from "./authority.js";
import { hashChains } from "./hash-chain.js";
import { MAX_EPOCH } from "./limits.js";
import { newReplicaState, planCreateRoom } from "./room-state.js";
import type { RoomState } from "./types.js";

const NOW = "2025-01-01T00:00:00.000Z";
const NOTHING_STORED = () => undefined;

function leader(): RoomState {
  const created = planCreateRoom({
    room_id: "r1",
    name: "Room",
    members: [
      { member_id: "ann", profile: "ann" },
      { member_id: "bob", profile: "bob" },
    ],
    self_gateway_id: "A",
    now: NOW,
    retired: false,
    exists: false,
  });
  if (!created.ok) throw new Error(created.refusal.message);
  return created.state;
}

/** B follows A@1 and holds seq 1..5. */
function follower(): RoomState {
  return {
    ...newReplicaState("r1", "B", "A"),
    authority: { gateway_id: "A", epoch: 1 },
    lineage: [{ epoch: 1, gateway_id: "A", start_seq: 1 }],
    last_seq: 5,
    last_hash: "f".repeat(64),
    latest_seq: 7,
    max_epoch_seen: 1,
  };
}

describe("planPromote", () => {
  it("requires confirm === true exactly", () => {
    for (const confirm of [undefined, false, "true", 1, {}]) {
      expect(planPromote(follower(), { confirm, max_durable_epoch: 1, stored: NOTHING_STORED }, NOW)).toMatchObject({
        ok: false,
        refusal: { reason: "confirm_required" },
      });
    }
  });

  it("takes a fresh claim id when the log already holds the usual one (a client's, from an older gateway)", () => {
    const held = new Set(["system:authority-claimed:7", "system:authority-claimed:7.2"]);
    const plan = planPromote(
      follower(),
      { confirm: true, max_durable_epoch: 6, stored: (id) => (held.has(id) ? "message.user" : undefined) },
      NOW,
    );
    if (!plan.ok) throw new Error(plan.refusal.message);
    expect(plan.claim).toMatchObject({ kind: "authority.claimed", epoch: 7, event_id: "system:authority-claimed:7.3" });
  });

  it("takes max durable epoch + 1, appends authority.claimed at last_seq + 1 and extends the lineage", () => {
    const plan = planPromote(follower(), { confirm: true, max_durable_epoch: 6, stored: NOTHING_STORED }, NOW);
    if (!plan.ok) throw new Error(plan.refusal.message);
    expect(plan.epoch).toBe(7);
    expect(plan.claim).toMatchObject({
      seq: 6,
      epoch: 7,
      kind: "authority.claimed",
      event_id: "system:authority-claimed:7",
      created_at: NOW,
    });
    expect(JSON.parse(plan.claim.payload_json)).toEqual({
      previous_gateway_id: "A",
      authority_gateway_id: "B",
      authority_epoch: 7,
      reason: "authority-unreachable",
      promoted_from_replica: true,
    });
    expect(JSON.parse(plan.claim.actor_json)).toEqual({ kind: "system", id: "authority-control" });
    expect(hashChains("f".repeat(64), plan.claim)).toBe(true);
    expect(plan.result).toEqual({
      room_id: "r1",
      authority_gateway_id: "B",
      authority_epoch: 7,
      previous_gateway_id: "A",
      previous_epoch: 1,
      claim_seq: 6,
      latest_seq: 6,
    });
    expect(plan.state).toMatchObject({
      role: "authority",
      authority: { gateway_id: "B", epoch: 7 },
      last_seq: 6,
      latest_seq: 6,
      last_hash: plan.claim.hash,
      max_epoch_seen: 7,
      lineage: [
        { epoch: 1, gateway_id: "A", start_seq: 1 },
        { epoch: 7, gateway_id: "B", start_seq: 6 },
      ],
    });
  });

  it("never reuses an epoch seen in the room, even when the durable counter is lower", () => {
    const seen = { ...follower(), max_epoch_seen: 9 };
    const plan = planPromote(seen, { confirm: true, max_durable_epoch: 2, reason: "maintenance", stored: NOTHING_STORED }, NOW);
    expect(plan.ok && plan.epoch).toBe(10);
    expect(plan.ok && JSON.parse(plan.claim.payload_json).reason).toBe("maintenance");
  });

  it("gives an empty replica that never saw a page at least epoch 2 (the creator holds 1)", () => {
    const plan = planPromote(newReplicaState("r1", "B", "A"), { confirm: true, max_durable_epoch: 0, stored: NOTHING_STORED }, NOW);
    expect(plan.ok && [plan.epoch, plan.result.claim_seq]).toEqual([2, 1]);
  });

  it("refuses on an unfenced authority and on a disbanded room; a fenced authority may claim again", () => {
    expect(planPromote(leader(), { confirm: true, max_durable_epoch: 1, stored: NOTHING_STORED }, NOW)).toMatchObject({
      ok: false,
      refusal: { reason: "refused" },
    });
    expect(
      planPromote({ ...follower(), disbanded: true }, { confirm: true, max_durable_epoch: 1, stored: NOTHING_STORED }, NOW),
    ).toMatchObject({
      ok: false,
      refusal: { reason: "room_disbanded" },
    });
    const fenced = observeEpoch(leader(), { gateway_id: "C", epoch: 4 })!.state;
    const again = planPromote(fenced, { confirm: true, max_durable_epoch: 1, stored: NOTHING_STORED }, NOW);
    expect(again.ok && again.result).toMatchObject({ authority_epoch: 5, previous_gateway_id: "C", previous_epoch: 4 });
    expect(again.ok && again.state).toMatchObject({ fenced_by: null, safety_status: "passive" });
  });

  it("refuses a bad reason", () => {
    expect(planPromote(follower(), { confirm: true, reason: "", max_durable_epoch: 1, stored: NOTHING_STORED }, NOW)).toMatchObject({
      ok: false,
      refusal: { reason: "invalid_params" },
    });
  });
});

describe("planDemote", () => {
  it("requires all params", () => {
    expect(planDemote(leader(), { observed_gateway_id: undefined, observed_epoch: 2 }, NOW)).toMatchObject({
      ok: false,
      refusal: { reason: "invalid_params" },
    });
    expect(planDemote(leader(), { observed_gateway_id: "B", observed_epoch: undefined }, NOW)).toMatchObject({
      ok: false,
      refusal: { reason: "invalid_params" },
    });
    expect(planDemote(leader(), { observed_gateway_id: "B", observed_epoch: 2.5 }, NOW)).toMatchObject({
      ok: false,
      refusal: { reason: "invalid_params" },
    });
  });

  it("records the demotion beside the log (nothing is appended) and follows the observed authority", () => {
    const before = leader();
    const plan = planDemote(before, { observed_gateway_id: "B", observed_epoch: 3 }, NOW);
    if (!plan.ok || plan.idempotent) throw new Error("expected a demote");
    expect(plan.demotion).toEqual({
      room_id: "r1",
      demoted_at: NOW,
      previous_gateway_id: "A",
      previous_epoch: 1,
      authority_gateway_id: "B",
      authority_epoch: 3,
      last_seq: 1,
    });
    expect(plan.result).toEqual({ room_id: "r1", authority_gateway_id: "B", authority_epoch: 3, idempotent: false });
    expect(plan.state).toMatchObject({
      role: "replica",
      authority: { gateway_id: "B", epoch: 3 },
      last_seq: 1,
      last_hash: before.last_hash,
      latest_seq: 0,
      max_epoch_seen: 3,
      lineage: [{ epoch: 1, gateway_id: "A", start_seq: 1 }],
    });
    const again = planDemote(plan.state, { observed_gateway_id: "B", observed_epoch: 3 }, NOW);
    expect(again).toEqual({
      ok: true,
      idempotent: true,
      result: { room_id: "r1", authority_gateway_id: "B", authority_epoch: 3, idempotent: true },
    });
  });

  it("bounds epochs so the next promote stays exact on the wire", () => {
    expect(planDemote(leader(), { observed_gateway_id: "B", observed_epoch: Number.MAX_SAFE_INTEGER }, NOW)).toMatchObject({
      ok: false,
      refusal: { reason: "invalid_params" },
    });
    const demoted = planDemote(leader(), { observed_gateway_id: "B", observed_epoch: MAX_EPOCH }, NOW);
    if (!demoted.ok || demoted.idempotent) throw new Error("demote to MAX_EPOCH should succeed");
    expect(planPromote(demoted.state, { confirm: true, max_durable_epoch: 0, stored: NOTHING_STORED }, NOW)).toMatchObject({
      ok: false,
      refusal: { reason: "limit_exceeded" },
    });
  });

  it("refuses epochs that are not newer than its own or than one it has seen", () => {
    expect(planDemote(leader(), { observed_gateway_id: "B", observed_epoch: 1 }, NOW)).toMatchObject({
      ok: false,
      refusal: { reason: "epoch_regression" },
    });
    const fenced = observeEpoch(leader(), { gateway_id: "C", epoch: 5 })!.state;
    expect(planDemote(fenced, { observed_gateway_id: "B", observed_epoch: 4 }, NOW)).toMatchObject({
      ok: false,
      refusal: { reason: "epoch_regression", data: { authority: { gateway_id: "C", epoch: 5 } } },
    });
    expect(planDemote(fenced, { observed_gateway_id: "B", observed_epoch: 5 }, NOW)).toMatchObject({
      ok: false,
      refusal: { reason: "lineage_mismatch" },
    });
    expect(planDemote(fenced, { observed_gateway_id: "C", observed_epoch: 5 }, NOW).ok).toBe(true);
  });
});

describe("observeEpoch (self-fencing)", () => {
  it.each([
    ["B", 2, "B@2"],
    ["B", 1, "B@1"],
    ["A", 1, null],
    ["A", 3, "A@3"],
    ["B", 0, null],
  ])("authority A@1 observing %s@%i → %s", (gateway, epoch, fence) => {
    const observed = observeEpoch(leader(), { gateway_id: gateway, epoch });
    expect(observed ? `${observed.fence.gateway_id}@${observed.fence.epoch}` : null).toBe(fence);
  });

  it("keeps the strongest fence and ignores replicas", () => {
    const fenced = observeEpoch(leader(), { gateway_id: "B", epoch: 3 })!.state;
    expect(fenced).toMatchObject({ safety_status: "fenced", max_epoch_seen: 3, fenced_by: { gateway_id: "B", epoch: 3 } });
    expect(observeEpoch(fenced, { gateway_id: "C", epoch: 2 })).toBeNull();
    expect(observeEpoch(fenced, { gateway_id: "C", epoch: 3 })).toBeNull();
    expect(observeEpoch(fenced, { gateway_id: "C", epoch: 4 })?.fence).toEqual({ gateway_id: "C", epoch: 4 });
    expect(observeEpoch(follower(), { gateway_id: "C", epoch: 9 })).toBeNull();
  });
});
