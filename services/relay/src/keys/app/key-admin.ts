import { randomBytes } from "node:crypto";
import { type Clock, isoTime } from "@hermes/common";
import { assertConnectionName } from "@hermes/contract";
import type { ConnectionInfo } from "@hermes/proto/hermes/v1/relay";
import type { RelayStore } from "../../home/store/relay-store.js";
import { hashKey, newConnectionKey } from "../core/keys.js";

/** Connection keys on a relay database: what both the running relay and `hermes relay key` (relay stopped) use. */
export class KeyAdmin {
  constructor(
    private readonly store: RelayStore,
    private readonly clock: Clock,
  ) {}

  add(connection: string): { connection: string; key: string; created_at: string } {
    assertConnectionName(connection);
    const key = newConnectionKey(randomBytes);
    const created_at = isoTime(this.clock.now());
    this.store.addKey(connection, hashKey(key), created_at);
    return { connection, key, created_at };
  }

  list(online: (connection: string) => boolean = () => false): ConnectionInfo[] {
    const roster = new Map(this.store.loadRoster().map((c) => [c.connection, c.bots.length]));
    return this.store.keys().map((k) => ({
      connection: k.connection,
      created_at: k.created_at,
      online: online(k.connection),
      gateway_id: k.gateway_id ?? "",
      last_seen_at: k.last_seen_at ?? "",
      bots: roster.get(k.connection) ?? 0,
    }));
  }
}
