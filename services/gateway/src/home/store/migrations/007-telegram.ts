import type { Migration } from "@hermes/common";

/**
 * The Telegram platform:
 *
 * - `telegram_offsets`: per bot (its numeric id, the public part of the token), the update_id after
 *   the last update handed over. It moves in the same transaction as the update's intake.
 * - `telegram_inbox`: updates handed over and not finished, so a restart neither loses nor
 *   repeats one: `queued` (not started: run at the next start), `running` (the turn was under
 *   way: the chat is told it was interrupted, the turn is not run again), `replying` (the answer,
 *   `reply_text`, is being sent: the messages after the first `sent_parts` are sent at the next
 *   start). A row is deleted when its answer (or failure answer) is out. It holds the Telegram
 *   facts only (chat, sender, text), no profile name.
 * - `telegram_topics`: which session of which profile serves a chat or forum topic (`topic_id` ''
 *   for the chat itself), and the bot that last served it. Like the routing key, a binding does not
 *   depend on the bot: a new token for the same profile continues the same conversations.
 * - `telegram_refused_chats`: chats outside allowed_chats that were told so once.
 *
 * Identity (identity/core/registry.ts): telegram_topics.profile and telegram_topics.session_key
 * (a routing key); a binding (chat_id, topic_id) is unique per profile.
 */
export const telegramMigration: Migration = {
  version: 7,
  name: "telegram",
  up(db) {
    db.exec(`
      CREATE TABLE telegram_offsets (
        bot_id TEXT PRIMARY KEY,
        next_offset INTEGER NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE telegram_inbox (
        bot_id TEXT NOT NULL,
        update_id INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'replying')),
        work_json TEXT NOT NULL,
        reply_text TEXT,
        sent_parts INTEGER NOT NULL DEFAULT 0,
        received_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (bot_id, update_id)
      );
      CREATE TABLE telegram_topics (
        profile TEXT NOT NULL,
        bot_id TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        topic_id TEXT NOT NULL,
        chat_type TEXT NOT NULL,
        session_key TEXT NOT NULL UNIQUE,
        session_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (profile, chat_id, topic_id)
      );
      CREATE TABLE telegram_refused_chats (
        bot_id TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        refused_at TEXT NOT NULL,
        PRIMARY KEY (bot_id, chat_id)
      );
    `);
  },
};
