import type { Migration } from "@hermes/common";

/**
 * Bot-to-bot delivery: the sender's outbox and the target's ingress, one row per delivery id on
 * each side (a delivery between two bots of this gateway has a row in both). Both sides carry the
 * receipt fields of delivery/core/receipt.ts, so a row converts to a DeliveryRecord without joins.
 *
 * Identity (identity/core/registry.ts): outbox.from_profile, outbox.sender_session_key and
 * outbox.target_profile (local routes only); ingress.target_profile and ingress.session_key. The
 * sender of an ingress row is stored qualified (`<profile>@<gateway>`, as in the receipt's `from`),
 * because it is the sending gateway's statement of who wrote it, not a local identity.
 */
export const deliveriesMigration: Migration = {
  version: 3,
  name: "deliveries",
  up(db) {
    db.exec(`
      CREATE TABLE delivery_outbox (
        delivery_id TEXT PRIMARY KEY,
        from_profile TEXT NOT NULL,
        from_gateway TEXT NOT NULL,
        sender_session_key TEXT NOT NULL,
        target TEXT NOT NULL,
        route_kind TEXT NOT NULL CHECK (route_kind IN ('local', 'peer', 'relay')),
        route_json TEXT NOT NULL,
        target_profile TEXT,
        message TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        created_at TEXT NOT NULL,
        ttl_seconds INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('queued', 'claimed', 'settled', 'failed', 'cancelled', 'expired', 'ambiguous')),
        reason TEXT,
        error TEXT,
        attempts INTEGER NOT NULL DEFAULT 0,
        settled_at TEXT,
        reply TEXT,
        compact INTEGER NOT NULL DEFAULT 0,
        updated_at TEXT NOT NULL,
        notified_at TEXT
      );
      CREATE INDEX delivery_outbox_by_state ON delivery_outbox(state);
      CREATE INDEX delivery_outbox_by_sender ON delivery_outbox(from_profile, created_at);
      CREATE INDEX delivery_outbox_by_target ON delivery_outbox(target_profile);
      CREATE INDEX delivery_outbox_unnotified ON delivery_outbox(notified_at) WHERE notified_at IS NULL;

      CREATE TABLE delivery_ingress (
        delivery_id TEXT PRIMARY KEY,
        sender TEXT NOT NULL,
        sender_name TEXT NOT NULL,
        target TEXT NOT NULL,
        target_profile TEXT NOT NULL,
        session_key TEXT NOT NULL,
        source TEXT NOT NULL CHECK (source IN ('local', 'peer', 'relay')),
        message TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        created_at TEXT NOT NULL,
        ttl_seconds INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('queued', 'claimed', 'settled', 'failed', 'cancelled', 'expired', 'ambiguous')),
        reason TEXT,
        error TEXT,
        attempts INTEGER NOT NULL DEFAULT 0,
        claimed_at TEXT,
        settled_at TEXT,
        reply TEXT,
        compact INTEGER NOT NULL DEFAULT 0,
        updated_at TEXT NOT NULL
      );
      CREATE INDEX delivery_ingress_by_state ON delivery_ingress(state);
      CREATE INDEX delivery_ingress_by_target ON delivery_ingress(target_profile, created_at);
    `);
  },
};
