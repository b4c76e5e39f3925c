import type { Migration } from "@hermes/common";
import { identityMigration, transcriptMigration } from "./001-identity.js";
import { roomsMigration } from "./002-rooms.js";
import { deliveriesMigration } from "./003-deliveries.js";
import { peerRunsMigration } from "./004-peer-runs.js";
import { roomHostsAndDemotionsMigration } from "./005-room-hosts-demotions.js";
import { roomReplicationMigration } from "./006-room-replication.js";
import { telegramMigration } from "./007-telegram.js";
import { routinesMigration } from "./008-routines.js";
import { roomLogSegmentsMigration } from "./009-room-log-segments.js";
import { profileIdsMigration } from "./010-profile-ids.js";
import { roomIdRunsMigration } from "./011-room-id-runs.js";
import { a2aTasksMigration } from "./012-a2a-tasks.js";

/**
 * The gateway's HERMES_HOME/state.db schema, numbered and applied in order at start
 * (PRAGMA user_version). Append new migrations; never edit one that has shipped.
 */
export const GATEWAY_MIGRATIONS: readonly Migration[] = [
  identityMigration,
  roomsMigration,
  deliveriesMigration,
  peerRunsMigration,
  roomHostsAndDemotionsMigration,
  roomReplicationMigration,
  telegramMigration,
  routinesMigration,
  roomLogSegmentsMigration,
  profileIdsMigration,
  roomIdRunsMigration,
  a2aTasksMigration,
];

/** A named profile's profiles/<name>/state.db (the default profile's transcripts live in the root one). */
export const PROFILE_MIGRATIONS: readonly Migration[] = [transcriptMigration];
