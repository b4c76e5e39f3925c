import { type Clock, type Db, isoTime, type Logger, newId } from "@hermes/common";
import { type RoutingEntry, RoutingIndex } from "../core/routing-index.js";
import { botChatOrigin, type RoutingOrigin, routingKey } from "../core/routing-key.js";
import { loadRoutingEntries, persistRoutingChanges } from "../store/routing-store.js";
import { type SessionKind, type SessionRow, SessionsStore } from "../store/sessions-store.js";

/**
 * Where routing entries go: a live gateway keeps them in its in-memory index (persisted on change
 * and periodically); the CLI, with no gateway holding the store, writes them straight to the DB.
 */
export interface RoutingAccess {
  upsert(entry: RoutingEntry): void;
  /** Keys a rekey old → new would overwrite in the live index (none without a live index). */
  collisions(oldName: string, newName: string): string[];
  /** Rekeys the live index after the store moved the rows (renamed the profile's id; they are not written again). */
  rekeyProfile(oldName: string, newName: string): number;
  removeProfile(name: string): number;
  /** Persists pending changes now. */
  flush(): void;
}

/** RoutingAccess for a process that does not own a live index: every change goes to the DB at once. */
export function directRouting(db: Db): RoutingAccess {
  return {
    upsert: (entry) => persistRoutingChanges(db, { upserts: [entry], deletes: [] }),
    collisions: () => [],
    rekeyProfile: () => 0,
    removeProfile: () => 0,
    flush: () => {},
  };
}

/**
 * RoutingAccess of a running gateway: the in-memory index (loaded at start), persisted right after
 * a change (the changes of one tick in one commit) and every `gateway.routing_persist_seconds`.
 */
export class LiveRouting implements RoutingAccess {
  readonly index: RoutingIndex;
  private flushScheduled = false;

  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
  ) {
    this.index = RoutingIndex.from(loadRoutingEntries(db));
  }

  upsert(entry: RoutingEntry): void {
    this.index.upsert(entry);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  collisions(oldName: string, newName: string): string[] {
    return this.index.collisions(oldName, newName);
  }

  rekeyProfile(oldName: string, newName: string): number {
    return this.index.rekeyProfile(oldName, newName);
  }

  removeProfile(name: string): number {
    return this.index.removeProfile(name);
  }

  /** Persists pending changes; when that fails they are kept (and logged) for the next try. */
  flush(): void {
    if (!this.index.hasChanges) return;
    const changes = this.index.takeChanges();
    try {
      persistRoutingChanges(this.db, changes);
    } catch (err) {
      this.index.restoreChanges(changes);
      this.logger.error({ err }, "persisting the routing index failed; will retry");
    }
  }

  /** The last persist, at a graceful stop: a failure is thrown to the caller. */
  persistAll(): void {
    persistRoutingChanges(this.db, this.index.takeChanges());
  }
}

/** Sessions keyed by routing key: one per (profile, platform, chat, thread); the Bot Chat is one of them. */
export class SessionService {
  readonly store: SessionsStore;

  constructor(
    db: Db,
    private readonly routing: RoutingAccess,
    private readonly clock: Clock,
  ) {
    this.store = new SessionsStore(db);
  }

  /** The session for an origin, created (with its routing entry) on first use. */
  ensure(origin: RoutingOrigin, kind: SessionKind, title: string): SessionRow {
    const key = routingKey(origin);
    const existing = this.store.byKey(key);
    if (existing) return existing;
    const now = isoTime(this.clock.now());
    const session: SessionRow = {
      session_id: newId("ses"),
      session_key: key,
      profile_name: origin.profile,
      title,
      kind,
      origin,
      model_override: null,
      provider_override: null,
      created_at: now,
      updated_at: now,
    };
    this.store.insert(session);
    this.routing.upsert({ routing_key: key, session_key: key, session_id: session.session_id, origin, updated_at: now });
    return session;
  }

  /** Each profile's canonical Bot Chat, created with the profile. */
  botChat(profile: string): SessionRow {
    return this.ensure(botChatOrigin(profile), "bot_chat", "Bot Chat");
  }

  /**
   * Records activity: the session's updated_at and its routing entry. The row is read again, so a
   * turn that started before a rename touches the new key (never the old one back into the
   * index), and one whose profile was deleted meanwhile touches nothing.
   */
  touch(sessionId: string): void {
    const session = this.store.byId(sessionId);
    if (session) this.touchRow(session);
  }

  /** `touch` for a row the caller read in the same synchronous stretch (nothing can have rekeyed it since). */
  touchRow(session: SessionRow): void {
    const now = isoTime(this.clock.now());
    this.store.touch(session.session_id, now);
    this.routing.upsert({
      routing_key: session.session_key,
      session_key: session.session_key,
      session_id: session.session_id,
      origin: session.origin,
      updated_at: now,
    });
  }
}
