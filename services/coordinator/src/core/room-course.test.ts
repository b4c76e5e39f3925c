import { describe, expect, it } from "vitest";
import type { AuthorityRecord } from "./authority-record.js";
import { decideRoomCourse, type RoomCourseInput } from "./room-course.js";

const record: AuthorityRecord = { gateway_id: "A", epoch: 3, isr: ["A", "B"], replicas: ["A", "B", "C"], min_insync: 2, lease: "10" };
const base: RoomCourseInput = {
  self: "B",
  selfLease: "20",
  record,
  recordLeaseAlive: true,
  local: { role: "replica", epoch: 3 },
  released: false,
  paused: false,
};

describe("decideRoomCourse", () => {
  const cases: Array<{ name: string; input: Partial<RoomCourseInput>; want: object }> = [
    {
      name: "a replica follows the live holder",
      input: {},
      want: { kind: "follow", authority: { gateway_id: "A", epoch: 3 }, demote: false },
    },
    { name: "a replica without a copy yet follows too", input: { local: null }, want: { kind: "follow", demote: false } },
    { name: "a paused replica waits", input: { paused: true }, want: { kind: "wait" } },
    { name: "not one of the replicas: ignore", input: { self: "D" }, want: { kind: "ignore" } },
    {
      name: "the holder under its lease leads",
      input: { self: "A", selfLease: "10", local: { role: "authority", epoch: 3 } },
      want: { kind: "lead", promote: false },
    },
    {
      name: "the holder whose local claim did not happen promotes first",
      input: { self: "A", selfLease: "10", local: { role: "replica", epoch: 2 } },
      want: { kind: "lead", promote: true },
    },
    { name: "the lease gone, an ISR member claims", input: { recordLeaseAlive: false }, want: { kind: "claim" } },
    {
      name: "a released record: an ISR member claims at once",
      input: { recordLeaseAlive: false, record: { ...record, lease: null } },
      want: { kind: "claim" },
    },
    {
      name: "the releaser itself waits for another to claim",
      input: {
        self: "A",
        selfLease: "10",
        recordLeaseAlive: false,
        released: true,
        record: { ...record, lease: null },
        local: { role: "authority", epoch: 3 },
      },
      want: { kind: "wait" },
    },
    {
      name: "the releaser follows whoever claimed, demoting itself",
      input: {
        self: "A",
        selfLease: "10",
        released: true,
        record: { ...record, gateway_id: "B", epoch: 4, isr: ["B"] },
        local: { role: "authority", epoch: 3 },
      },
      want: { kind: "follow", authority: { gateway_id: "B", epoch: 4 }, demote: true },
    },
    {
      name: "a restarted holder (new lease, the old one dead) claims again",
      input: { self: "A", selfLease: "11", recordLeaseAlive: false, local: { role: "authority", epoch: 3 } },
      want: { kind: "claim" },
    },
    {
      name: "a restarted holder waits while its old process's lease lives",
      input: { self: "A", selfLease: "11", local: { role: "authority", epoch: 3 } },
      want: { kind: "wait" },
    },
    {
      name: "an old authority back from a pause demotes itself and follows",
      input: { self: "C", record: { ...record, epoch: 4 }, local: { role: "authority", epoch: 3 } },
      want: { kind: "follow", authority: { gateway_id: "A", epoch: 4 }, demote: true },
    },
    {
      name: "an old authority outside the ISR, the new holder dead too: it demotes and follows, never claims",
      input: { self: "C", recordLeaseAlive: false, record: { ...record, epoch: 4 }, local: { role: "authority", epoch: 3 } },
      want: { kind: "follow", demote: true },
    },
    { name: "without a valid lease nobody claims", input: { recordLeaseAlive: false, selfLease: null }, want: { kind: "wait" } },
    {
      name: "a replica outside the ISR keeps following the dead holder",
      input: { self: "C", recordLeaseAlive: false },
      want: { kind: "follow", demote: false },
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      expect(decideRoomCourse({ ...base, ...c.input })).toMatchObject(c.want);
    });
  }
});
