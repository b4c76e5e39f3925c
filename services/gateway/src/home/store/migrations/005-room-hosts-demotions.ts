import type { Migration } from "@hermes/common";

interface MemberRow {
  member_id: string;
  profile: string;
  gateway_id?: string;
  display_name?: string;
}

/**
 * Rooms, second step:
 *
 * - `rooms.members_json` names the gateway hosting every member. Earlier versions left
 *   `gateway_id` out for the creator's own profiles, and a gateway that took over the room then
 *   looked for them at home. Such members are hosted by the gateway that wrote the member list:
 *   the authority (lineage entry) in force at the seq of the room's newest room.created /
 *   room.members_changed event. The log itself is hash-chained and stays as it is; the store
 *   applies the same rule when it reads member lists from events.
 * - `room_demotions`: the audit record of each demotion of a room on this gateway (who led, who
 *   took over, where the log ended). Demote used to append an `authority.lost` event instead, which
 *   forked the log of every clean handover.
 */
export const roomHostsAndDemotionsMigration: Migration = {
  version: 5,
  name: "room-member-hosts-and-demotions",
  up(db) {
    db.exec(`
      CREATE TABLE room_demotions (
        room_id TEXT NOT NULL,
        demoted_at TEXT NOT NULL,
        previous_gateway_id TEXT NOT NULL,
        previous_epoch INTEGER NOT NULL,
        authority_gateway_id TEXT NOT NULL,
        authority_epoch INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        PRIMARY KEY (room_id, authority_epoch)
      );
    `);
    const writerOfMembers = db.prepare(`
      SELECT l.gateway_id FROM room_events e
      JOIN room_lineage l ON l.room_id = e.room_id AND l.start_seq <= e.seq
      WHERE e.room_id = ? AND e.kind IN ('room.created', 'room.members_changed')
      ORDER BY e.seq DESC, l.epoch DESC LIMIT 1`);
    const update = db.prepare("UPDATE rooms SET members_json = ? WHERE room_id = ?");
    const rooms = db.prepare("SELECT room_id, members_json FROM rooms").all() as { room_id: string; members_json: string }[];
    for (const room of rooms) {
      let members: MemberRow[];
      try {
        members = JSON.parse(room.members_json) as MemberRow[];
      } catch {
        continue;
      }
      if (!Array.isArray(members) || members.every((m) => m.gateway_id !== undefined)) continue;
      const writer = (writerOfMembers.get(room.room_id) as { gateway_id: string } | undefined)?.gateway_id;
      if (writer === undefined) continue;
      update.run(JSON.stringify(members.map((m) => (m.gateway_id === undefined ? { ...m, gateway_id: writer } : m))), room.room_id);
    }
  },
};
