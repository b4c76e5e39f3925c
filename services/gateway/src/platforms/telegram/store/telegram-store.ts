import { type Db, statement } from "@hermes/common";
import type { TelegramChat, TelegramWork } from "../core/intake.js";

/**
 * The Telegram tables of the gateway's state.db (home/store/migrations/007-telegram.ts): the update
 * offset, the inbox of updates handed over and not finished, the chat and topic bindings, and the
 * chats refused once. Everything is keyed by the bot's numeric id, so two bots never share an offset.
 */

/** Where an update handed over stands: not started, its turn under way, its answer being sent. */
export type InboxState = "queued" | "running" | "replying";

export interface InboxEntry {
  update_id: number;
  state: InboxState;
  work: TelegramWork;
  /** While `replying`: the answer, and how many of its messages Telegram accepted. */
  reply?: { text: string; sent: number } | undefined;
}

export interface TopicBinding {
  profile: string;
  bot_id: string;
  chat_id: string;
  /** '' for the chat itself. */
  topic_id: string;
  chat_type: string;
  session_key: string;
  session_id: string;
}

export class TelegramStore {
  constructor(
    readonly db: Db,
    readonly botId: string,
  ) {}

  // ---- offset ----------------------------------------------------------------------------------

  loadOffset(): number | undefined {
    const row = statement(this.db, "SELECT next_offset FROM telegram_offsets WHERE bot_id = ?").get(this.botId) as
      | { next_offset: number }
      | undefined;
    return row?.next_offset;
  }

  saveOffset(offset: number, now: string): void {
    statement(
      this.db,
      `INSERT INTO telegram_offsets (bot_id, next_offset, updated_at) VALUES (?, ?, ?)
       ON CONFLICT (bot_id) DO UPDATE SET next_offset = excluded.next_offset, updated_at = excluded.updated_at`,
    ).run(this.botId, offset, now);
  }

  // ---- inbox -----------------------------------------------------------------------------------

  /**
   * Records an update as handed over and runs `commitOffset` in the same transaction, so a crash
   * keeps both or neither. An update already in the inbox is not recorded twice.
   */
  accept(work: TelegramWork, now: string, commitOffset: () => void): void {
    this.db.transaction(() => {
      statement(
        this.db,
        `INSERT INTO telegram_inbox (bot_id, update_id, state, work_json, received_at, updated_at)
         VALUES (?, ?, 'queued', ?, ?, ?) ON CONFLICT (bot_id, update_id) DO NOTHING`,
      ).run(this.botId, work.update_id, JSON.stringify(work), now, now);
      commitOffset();
    })();
  }

  /** The turn left the session's queue. */
  markRunning(updateId: number, now: string): void {
    statement(this.db, "UPDATE telegram_inbox SET state = 'running', updated_at = ? WHERE bot_id = ? AND update_id = ?").run(
      now,
      this.botId,
      updateId,
    );
  }

  /** The answer is known and about to be sent. */
  markReplying(updateId: number, text: string, now: string): void {
    statement(
      this.db,
      "UPDATE telegram_inbox SET state = 'replying', reply_text = ?, sent_parts = 0, updated_at = ? WHERE bot_id = ? AND update_id = ?",
    ).run(text, now, this.botId, updateId);
  }

  /** Telegram accepted the first `sent` messages of the answer. */
  markSent(updateId: number, sent: number, now: string): void {
    statement(this.db, "UPDATE telegram_inbox SET sent_parts = ?, updated_at = ? WHERE bot_id = ? AND update_id = ?").run(
      sent,
      now,
      this.botId,
      updateId,
    );
  }

  /** The update is answered (or its failure told): it leaves the inbox. */
  finish(updateId: number): void {
    statement(this.db, "DELETE FROM telegram_inbox WHERE bot_id = ? AND update_id = ?").run(this.botId, updateId);
  }

  inboxSize(): number {
    return (statement(this.db, "SELECT count(*) AS n FROM telegram_inbox WHERE bot_id = ?").get(this.botId) as { n: number }).n;
  }

  /** What a restart finds, in update order. Rows that no longer parse are returned as `unreadable` (their ids). */
  inbox(): { entries: InboxEntry[]; unreadable: number[] } {
    const rows = statement(
      this.db,
      "SELECT update_id, state, work_json, reply_text, sent_parts FROM telegram_inbox WHERE bot_id = ? ORDER BY update_id",
    ).all(this.botId) as { update_id: number; state: InboxState; work_json: string; reply_text: string | null; sent_parts: number }[];
    const entries: InboxEntry[] = [];
    const unreadable: number[] = [];
    for (const row of rows) {
      try {
        entries.push({
          update_id: row.update_id,
          state: row.state,
          work: JSON.parse(row.work_json) as TelegramWork,
          ...(row.reply_text !== null ? { reply: { text: row.reply_text, sent: row.sent_parts } } : {}),
        });
      } catch {
        unreadable.push(row.update_id);
      }
    }
    return { entries, unreadable };
  }

  // ---- chat and topic bindings -----------------------------------------------------------------

  binding(profile: string, chat: TelegramChat): TopicBinding | undefined {
    return statement(
      this.db,
      `SELECT profile, bot_id, chat_id, topic_id, chat_type, session_key, session_id FROM telegram_topics
       WHERE profile = ? AND chat_id = ? AND topic_id = ?`,
    ).get(profile, chat.id, chat.topic_id ?? "") as TopicBinding | undefined;
  }

  /** Records (or refreshes) which session serves a chat or topic for a profile, and that this bot served it. */
  bind(binding: TopicBinding, now: string): void {
    statement(
      this.db,
      `INSERT INTO telegram_topics (profile, bot_id, chat_id, topic_id, chat_type, session_key, session_id, created_at, updated_at)
       VALUES (@profile, @bot_id, @chat_id, @topic_id, @chat_type, @session_key, @session_id, @now, @now)
       ON CONFLICT (profile, chat_id, topic_id) DO UPDATE SET
         bot_id = excluded.bot_id, chat_type = excluded.chat_type, session_key = excluded.session_key,
         session_id = excluded.session_id, updated_at = excluded.updated_at`,
    ).run({ ...binding, now });
  }

  /** Bindings per profile: chats and topics served (for status). */
  bindingCounts(): Record<string, { chats: number; topics: number }> {
    const rows = statement(
      this.db,
      `SELECT profile, SUM(topic_id = '') AS chats, SUM(topic_id <> '') AS topics FROM telegram_topics GROUP BY profile`,
    ).all() as { profile: string; chats: number; topics: number }[];
    return Object.fromEntries(rows.map((r) => [r.profile, { chats: r.chats, topics: r.topics }]));
  }

  // ---- refusals --------------------------------------------------------------------------------

  isRefused(chatId: string): boolean {
    return (
      statement(this.db, "SELECT 1 FROM telegram_refused_chats WHERE bot_id = ? AND chat_id = ?").get(this.botId, chatId) !== undefined
    );
  }

  addRefused(chatId: string, now: string): void {
    statement(
      this.db,
      "INSERT INTO telegram_refused_chats (bot_id, chat_id, refused_at) VALUES (?, ?, ?) ON CONFLICT (bot_id, chat_id) DO NOTHING",
    ).run(this.botId, chatId, now);
  }
}
