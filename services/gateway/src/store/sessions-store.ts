import { type Db, statement } from "@hermes/common";
import type { RoutingOrigin } from "../core/identity/routing-key.js";

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

interface RawSession extends Omit<SessionRow, "origin"> {
  origin_json: string;
}

const toSession = (r: RawSession): SessionRow => {
  const { origin_json, ...rest } = r;
  return { ...rest, origin: JSON.parse(origin_json) as RoutingOrigin };
};

export class SessionsStore {
  constructor(private readonly db: Db) {}

  insert(s: SessionRow): void {
    statement(
      this.db,
      `INSERT INTO sessions (session_id, session_key, profile_name, title, kind, origin_json, model_override, provider_override, created_at, updated_at)
         VALUES (@session_id, @session_key, @profile_name, @title, @kind, @origin_json, @model_override, @provider_override, @created_at, @updated_at)`,
    ).run({ ...s, origin_json: JSON.stringify(s.origin) });
  }

  byKey(sessionKey: string): SessionRow | undefined {
    const r = statement(this.db, "SELECT * FROM sessions WHERE session_key = ?").get(sessionKey) as RawSession | undefined;
    return r && toSession(r);
  }

  byId(sessionId: string): SessionRow | undefined {
    const r = statement(this.db, "SELECT * FROM sessions WHERE session_id = ?").get(sessionId) as RawSession | undefined;
    return r && toSession(r);
  }

  listByProfile(profile: string): SessionRow[] {
    return (statement(this.db, "SELECT * FROM sessions WHERE profile_name = ? ORDER BY created_at").all(profile) as RawSession[]).map(
      toSession,
    );
  }

  touch(sessionId: string, at: string): void {
    statement(this.db, "UPDATE sessions SET updated_at = ? WHERE session_id = ?").run(at, sessionId);
  }

  setModelOverride(sessionId: string, model: string | null, provider: string | null): void {
    statement(this.db, "UPDATE sessions SET model_override = ?, provider_override = ? WHERE session_id = ?").run(
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
