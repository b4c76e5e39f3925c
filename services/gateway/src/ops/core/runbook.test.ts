import { describe, expect, it } from "vitest";
import { waitConditionMet } from "./room-wait.js";
import { demoteCommand, promoteChecklist, promoteCoverageRefusal } from "./runbook.js";

const replica = {
  room_id: "ops",
  role: "replica",
  caught_up: false,
  last_seq: 4,
  latest_seq: 9,
  authority: { gateway_id: "gw-1", epoch: 1 },
};

describe("the promote checks (CLI and console)", () => {
  it("refuses a replica that is not caught up unless incomplete is allowed", () => {
    expect(promoteCoverageRefusal(replica, false)).toMatchObject({ reason: "refused", data: { last_seq: 4, latest_seq: 9 } });
    expect(promoteCoverageRefusal(replica, true)).toBeUndefined();
    expect(promoteCoverageRefusal({ ...replica, caught_up: true, last_seq: 9 }, false)).toBeUndefined();
    expect(promoteCoverageRefusal({ ...replica, role: "authority" }, false)).toBeUndefined();
    expect(promoteCoverageRefusal({ ...replica, latest_seq: 0 }, false)?.message).toMatch(/unknown: no page since the authority changed/);
  });

  it("prints the fencing checklist with the old authority and the exact demote", () => {
    const list = promoteChecklist("gw-2", replica);
    expect(list[0]).toBe("Fencing checklist before promoting ops on gw-2:");
    expect(list).toHaveLength(5);
    expect(list[1]).toMatch(/gw-1@1 cannot commit/);
    expect(list[2]).toMatch(/holds seq 4 of the authority's 9 \(NOT caught up\)/);
    expect(demoteCommand("ops", { gateway_id: "gw-2", epoch: 2 })).toBe(
      "hermes groups demote ops --observed-gateway gw-2 --observed-epoch 2",
    );
  });
});

describe("hermes wait room conditions", () => {
  const s = {
    role: "replica",
    caught_up: true,
    safety_status: "passive",
    last_seq: 9,
    latest_seq: 9,
    authority: { gateway_id: "gw-1", epoch: 1 },
  };
  it("caught-up, authority and passive", () => {
    expect(waitConditionMet("caught-up", s).met).toBe(true);
    expect(waitConditionMet("caught-up", { ...s, caught_up: false }).met).toBe(false);
    expect(waitConditionMet("authority", s)).toEqual({ met: false, now: "replica, authority gw-1@1" });
    expect(waitConditionMet("authority", { ...s, role: "authority" }).met).toBe(true);
    expect(waitConditionMet("authority", { ...s, role: "authority", safety_status: "fenced" }).met).toBe(false);
    expect(waitConditionMet("passive", { ...s, safety_status: "diverged" })).toEqual({ met: false, now: "safety diverged" });
  });
});
