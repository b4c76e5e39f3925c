import type { Migration } from "@hermes/common";

/**
 * Rooms, third step: `rooms.replication_json`, the room's replication policy as chosen at creation
 * (`{"mode":"quorum","replicas":[…],"min_insync":N}`; NULL for a local room). A replica records it
 * when it starts following a quorum room, so every gateway holding the room knows, from its own
 * disk, that sends to it are acknowledged only under the coordinator's lease.
 */
export const roomReplicationMigration: Migration = {
  version: 6,
  name: "room-replication-policy",
  up(db) {
    db.exec("ALTER TABLE rooms ADD COLUMN replication_json TEXT");
  },
};
