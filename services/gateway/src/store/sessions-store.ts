import { type Db, HermesError, statement } from "@hermes/common";
import {
  originOf,
  profileKeyPrefix,
  type RoutingOrigin,
  type StoredOrigin,
  splitProfileKey,
  withoutProfile,
} from "../core/identity/routing-key.js";
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

/** A session_records row joined with its profile's name (store/migrations/010-profile-ids.ts). */
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

/**
 * Sessions by id and by key. The table keeps the profile as its id and the key without its
 * `agent:<name>:` prefix; names are translated here, so a rename never touches these rows.
 */
export class SessionsStore {
  constructor(private readonly db: Db) {}

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
    const key = splitProfileKey(sessionKey);
    if (!key) return undefined;
    const r = statement(this.db, SESSION_BY_KEY).get(key.profile, key.chatKey) as RawSession | undefined;
    return r && toSession(r);
  }

  byId(sessionId: string): SessionRow | undefined {
    const r = statement(this.db, SESSION_BY_ID).get(sessionId) as RawSession | undefined;
    return r && toSession(r);
  }

  listByProfile(profile: string): SessionRow[] {
    return (statement(this.db, SESSIONS_OF_PROFILE).all(profile) as RawSession[]).map(toSession);
  }

  touch(sessionId: string, at: string): void {
    statement(this.db, "UPDATE session_records SET updated_at = ? WHERE session_id = ?").run(at, sessionId);
  }

  setModelOverride(sessionId: string, model: string | null, provider: string | null): void {
    statement(this.db, "UPDATE session_records SET model_override = ?, provider_override = ? WHERE session_id = ?").run(
      model,
      provider,
      sessionId,
    );
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

const toMessage = ({ meta_json, ...m }: StoredMessage): TranscriptMessage => ({
  ...m,
  meta: JSON.parse(meta_json) as Record<string, unknown>,
});

type AppendTransaction = ReturnType<typeof makeAppendTransaction>;

function makeAppendTransaction(db: Db) {
  const next = statement(db, "SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM messages WHERE session_id = ?");
  const insert = statement(db, "INSERT INTO messages (session_id, seq, role, content, meta_json, created_at) VALUES (?, ?, ?, ?, ?, ?)");
  return db.transaction((sessionId: string, messages: Omit<TranscriptMessage, "seq">[]): TranscriptMessage[] => {
    let seq = (next.get(sessionId) as { seq: number }).seq;
    return messages.map((m) => {
      insert.run(sessionId, seq, m.role, m.content, JSON.stringify(m.meta), m.created_at);
      return { ...m, seq: seq++ };
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

  /** Appends messages in one transaction with dense per-session seqs. */
  append(sessionId: string, messages: Omit<TranscriptMessage, "seq">[]): TranscriptMessage[] {
    return appendTransaction(this.db).immediate(sessionId, messages);
  }

  /** Replaces a session's transcript with a shorter one (context compaction); one transaction. */
  replace(sessionId: string, messages: Omit<TranscriptMessage, "seq">[]): void {
    this.db
      .transaction(() => {
        statement(this.db, "DELETE FROM messages WHERE session_id = ?").run(sessionId);
        this.append(sessionId, messages);
      })
      .immediate();
  }
}
