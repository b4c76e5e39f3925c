import { type Db, HermesError, LruMap, statement } from "@hermes/common";
import { originOf, profileKeyPrefix, type RoutingOrigin, type StoredOrigin, splitProfileKey, withoutProfile } from "../core/routing-key.js";
import { ensureProfileId } from "./profile-ids.js";

export type SessionKind = "bot_chat" | "chat" | "room" | "api" | "platform";

export interface SessionRow {
  session_id: string;
  session_key: string;
  profile_name: string;
  title: string;
  kind: SessionKind;
  origin: RoutingOrigin;
  model_override: string | null;
  provider_override: string | null;
  created_at: string;
  updated_at: string;
}

/** A session_records row joined with its profile's name (home/store/migrations/010-profile-ids.ts). */
interface RawSession extends Omit<SessionRow, "origin" | "session_key"> {
  chat_key: string;
  origin_json: string;
}

const SELECT_SESSIONS = `SELECT s.session_id, p.name AS profile_name, s.chat_key, s.title, s.kind, s.origin_json, s.model_override,
    s.provider_override, s.created_at, s.updated_at
  FROM session_records s JOIN profiles p ON p.id = s.profile_id`;
// Whole statements as constants: the statement cache is keyed by the SQL text, so a text built per call is hashed per call.
const SESSION_BY_KEY = `${SELECT_SESSIONS} WHERE p.name = ? AND s.chat_key = ?`;
const SESSION_BY_ID = `${SELECT_SESSIONS} WHERE s.session_id = ?`;
const SESSIONS_OF_PROFILE = `${SELECT_SESSIONS} WHERE p.name = ? ORDER BY s.created_at`;

/** The row as callers know it: the key and origin carry the profile's current name. */
const toSession = (r: RawSession): SessionRow => ({
  session_id: r.session_id,
  profile_name: r.profile_name,
  title: r.title,
  kind: r.kind,
  model_override: r.model_override,
  provider_override: r.provider_override,
  created_at: r.created_at,
  updated_at: r.updated_at,
  session_key: profileKeyPrefix(r.profile_name) + r.chat_key,
  origin: originOf(r.profile_name, JSON.parse(r.origin_json) as StoredOrigin),
});

/** How many session rows a connection keeps (least recently used out first): a few MB. */
const SESSION_ROWS_KEPT = 4096;

/**
 * The session rows a connection has read, by id and by key: a delivery looks its sessions up five
 * times (the lane, the turn twice, the touch, the notification), each a query before. While the gateway
 * holds the store a row changes only through this connection: through SessionsStore, which keeps
 * its copy current, or an identity change (a rename or delete), after which `forgetSessionRows`
 * drops every copy.
 */
class KeptSessions {
  private readonly byId = new LruMap<string, SessionRow>(SESSION_ROWS_KEPT);
  /** Ids by key; an entry whose row is gone or has another key now is ignored. */
  private readonly idByKey = new LruMap<string, string>(SESSION_ROWS_KEPT);

  get(sessionId: string): SessionRow | undefined {
    return this.byId.get(sessionId);
  }

  getByKey(sessionKey: string): SessionRow | undefined {
    const id = this.idByKey.get(sessionKey);
    const row = id === undefined ? undefined : this.byId.get(id);
    return row?.session_key === sessionKey ? row : undefined;
  }

  keep(row: SessionRow): SessionRow {
    this.byId.set(row.session_id, row);
    this.idByKey.set(row.session_key, row.session_id);
    return row;
  }

  forget(sessionId: string): void {
    this.byId.delete(sessionId);
  }

  clear(): void {
    this.byId.clear();
    this.idByKey.clear();
  }
}

const keptSessions = new WeakMap<Db, KeptSessions>();

function keptOf(db: Db): KeptSessions {
  let kept = keptSessions.get(db);
  if (!kept) {
    kept = new KeptSessions();
    keptSessions.set(db, kept);
  }
  return kept;
}

/** After a change that rewrote session rows behind SessionsStore (a profile renamed or deleted, a rolled-back touch). */
export function forgetSessionRows(db: Db): void {
  keptSessions.get(db)?.clear();
}

/**
 * Sessions by id and by key. The table keeps the profile as its id and the key without its
 * `agent:<name>:` prefix; names are translated here, so a rename never touches these rows.
 */
export class SessionsStore {
  private readonly kept: KeptSessions;

  constructor(private readonly db: Db) {
    this.kept = keptOf(db);
  }

  /** Writes a new session; its key must be one of its profile's (`agent:<profile_name>:…`). */
  insert(s: SessionRow): void {
    const key = splitProfileKey(s.session_key);
    if (key?.profile !== s.profile_name || s.origin.profile !== s.profile_name) {
      throw new HermesError("invalid_params", `session ${s.session_id}: key ${s.session_key} is not one of profile ${s.profile_name}'s`, {
        data: { session_id: s.session_id, session_key: s.session_key, profile: s.profile_name },
      });
    }
    this.db
      .transaction(() => {
        const profileId = ensureProfileId(this.db, s.profile_name);
        statement(
          this.db,
          `INSERT INTO session_records (session_id, profile_id, chat_key, title, kind, origin_json, model_override, provider_override, created_at, updated_at)
             VALUES (@session_id, @profile_id, @chat_key, @title, @kind, @origin_json, @model_override, @provider_override, @created_at, @updated_at)`,
        ).run({
          session_id: s.session_id,
          profile_id: profileId,
          chat_key: key.chatKey,
          title: s.title,
          kind: s.kind,
          origin_json: JSON.stringify(withoutProfile(s.origin)),
          model_override: s.model_override,
          provider_override: s.provider_override,
          created_at: s.created_at,
          updated_at: s.updated_at,
        });
      })
      .immediate();
  }

  byKey(sessionKey: string): SessionRow | undefined {
    const kept = this.kept.getByKey(sessionKey);
    if (kept) return kept;
    const key = splitProfileKey(sessionKey);
    if (!key) return undefined;
    const r = statement(this.db, SESSION_BY_KEY).get(key.profile, key.chatKey) as RawSession | undefined;
    return r && this.kept.keep(toSession(r));
  }

  byId(sessionId: string): SessionRow | undefined {
    const kept = this.kept.get(sessionId);
    if (kept) return kept;
    const r = statement(this.db, SESSION_BY_ID).get(sessionId) as RawSession | undefined;
    return r && this.kept.keep(toSession(r));
  }

  listByProfile(profile: string): SessionRow[] {
    return (statement(this.db, SESSIONS_OF_PROFILE).all(profile) as RawSession[]).map(toSession);
  }

  touch(sessionId: string, at: string): void {
    statement(this.db, "UPDATE session_records SET updated_at = ? WHERE session_id = ?").run(at, sessionId);
    const kept = this.kept.get(sessionId);
    if (kept) this.kept.keep({ ...kept, updated_at: at });
  }

  setModelOverride(sessionId: string, model: string | null, provider: string | null): void {
    statement(this.db, "UPDATE session_records SET model_override = ?, provider_override = ? WHERE session_id = ?").run(
      model,
      provider,
      sessionId,
    );
    this.kept.forget(sessionId);
  }
}

export interface TranscriptMessage {
  seq: number;
  role: "user" | "assistant" | "tool" | "notification";
  content: string;
  meta: Record<string, unknown>;
  created_at: string;
}

type StoredMessage = Omit<TranscriptMessage, "meta"> & { meta_json: string };

/** Field by field, not by rest and spread: a turn's history maps every message it remembers through this. */
const toMessage = (m: StoredMessage): TranscriptMessage => ({
  seq: m.seq,
  role: m.role,
  content: m.content,
  created_at: m.created_at,
  meta: (m.meta_json === "{}" ? {} : JSON.parse(m.meta_json)) as Record<string, unknown>,
});

type AppendTransaction = ReturnType<typeof makeAppendTransaction>;

function makeAppendTransaction(db: Db) {
  const next = statement(db, "SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM messages WHERE session_id = ?");
  const insert = statement(db, "INSERT INTO messages (session_id, seq, role, content, meta_json, created_at) VALUES (?, ?, ?, ?, ?, ?)");
  return db.transaction((sessionId: string, messages: Omit<TranscriptMessage, "seq">[], nextSeq: number | undefined): StoredMessage[] => {
    let seq = nextSeq ?? (next.get(sessionId) as { seq: number }).seq;
    return messages.map((m) => {
      const row: StoredMessage = {
        seq: seq++,
        role: m.role,
        content: m.content,
        meta_json: JSON.stringify(m.meta),
        created_at: m.created_at,
      };
      insert.run(sessionId, row.seq, row.role, row.content, row.meta_json, row.created_at);
      return row;
    });
  });
}

/** Each connection's append transaction, made once (making one per append costs a third of running it). */
const appendTransactions = new WeakMap<Db, AppendTransaction>();

function appendTransaction(db: Db): AppendTransaction {
  let tx = appendTransactions.get(db);
  if (!tx) {
    tx = makeAppendTransaction(db);
    appendTransactions.set(db, tx);
  }
  return tx;
}

/** How many sessions' transcript tails the process keeps, and how many messages of each. */
const TAILS_KEPT = 512;
const TAIL_MESSAGES = 8;

/**
 * The last messages of the sessions written most recently, as this process committed them, up to
 * the transcript's end: a turn whose remembered conversation is only a notification or two behind
 * gets them from here instead of a read. Session ids are unique across profiles; each tail names
 * the connection that wrote it (a renamed profile's database is opened again, and its tails no
 * longer count). While the gateway holds the store every message goes through TranscriptStore,
 * which extends a tail on each append and drops it on a replace.
 */
const transcriptTails = new LruMap<string, { db: Db; rows: readonly StoredMessage[] }>(TAILS_KEPT);

/** A profile's transcripts, in its own state.db (the root one for `default`). */
export class TranscriptStore {
  constructor(private readonly db: Db) {}

  list(sessionId: string, limit = 10_000): TranscriptMessage[] {
    const rows = statement(
      this.db,
      "SELECT seq, role, content, meta_json, created_at FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
    ).all(sessionId, limit) as StoredMessage[];
    return rows.reverse().map(toMessage);
  }

  /** The messages from seq `fromSeq` on, oldest first, at most `limit` of them (what was added to a remembered conversation). */
  from(sessionId: string, fromSeq: number, limit: number): TranscriptMessage[] {
    const rows = statement(
      this.db,
      "SELECT seq, role, content, meta_json, created_at FROM messages WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?",
    ).all(sessionId, fromSeq, limit) as StoredMessage[];
    return rows.map(toMessage);
  }

  /**
   * The messages from seq `fromSeq` to the transcript's end when this process wrote them all and
   * still has them (see transcriptTails), else undefined: `from` without a read.
   */
  keptFrom(sessionId: string, fromSeq: number): TranscriptMessage[] | undefined {
    const rows = this.tail(sessionId);
    const first = rows?.[0]?.seq;
    if (rows === undefined || first === undefined || fromSeq < first || fromSeq > first + rows.length - 1) return undefined;
    return rows.slice(fromSeq - first).map(toMessage);
  }

  /**
   * Appends messages in one transaction with dense per-session seqs. A kept tail ends where the
   * transcript ends, so its last seq gives the next one without a read (were it ever wrong, the
   * primary key refuses the insert and the transaction rolls back: nothing is overwritten).
   */
  append(sessionId: string, messages: Omit<TranscriptMessage, "seq">[]): TranscriptMessage[] {
    const before = this.tail(sessionId);
    transcriptTails.delete(sessionId);
    const last = before?.at(-1)?.seq;
    const rows = appendTransaction(this.db).immediate(sessionId, messages, last === undefined ? undefined : last + 1);
    const first = rows[0];
    // Inside an outer transaction (replace) the rows may still be rolled back: only committed rows are kept.
    if (first && !this.db.inTransaction) {
      const joined = before && before.at(-1)?.seq === first.seq - 1 ? [...before, ...rows] : rows;
      transcriptTails.set(sessionId, { db: this.db, rows: joined.slice(-TAIL_MESSAGES) });
    }
    return messages.map((m, i) => ({ ...m, seq: rows[i]!.seq }));
  }

  private tail(sessionId: string): readonly StoredMessage[] | undefined {
    const tail = transcriptTails.get(sessionId);
    return tail?.db === this.db ? tail.rows : undefined;
  }

  /** Replaces a session's transcript with a shorter one (context compaction); one transaction. */
  replace(sessionId: string, messages: Omit<TranscriptMessage, "seq">[]): void {
    transcriptTails.delete(sessionId);
    this.db
      .transaction(() => {
        statement(this.db, "DELETE FROM messages WHERE session_id = ?").run(sessionId);
        this.append(sessionId, messages);
      })
      .immediate();
  }
}
