import { Counter, Gauge, type Registry } from "prom-client";
import type { TelegramBotStatus } from "./telegram-bot.js";

const POLLER_STATES = ["starting", "polling", "standby", "backoff", "conflict", "stopped"] as const;

/**
 * The bot's metrics, read from its status when scraped: updates received (and ignored, by reason),
 * messages sent, errors by kind (Bot API calls of the poller and of sends, failed turns by reason)
 * and the poller's state (1 for the current one), so `conflict` and `standby` can be alerted on.
 */
export function registerTelegramMetrics(registry: Registry | undefined, status: () => TelegramBotStatus): void {
  if (!registry) return;
  const registers = [registry];
  new Counter({
    name: "hermes_telegram_updates_received_total",
    help: "Updates getUpdates delivered to this gateway's Telegram bot",
    registers,
    collect() {
      this.reset();
      this.inc(status().counters.updates_received);
    },
  });
  new Counter({
    name: "hermes_telegram_updates_ignored_total",
    help: "Updates answered with silence, by reason (edited messages, stickers, service messages, …)",
    labelNames: ["reason"] as const,
    registers,
    collect() {
      this.reset();
      for (const [reason, n] of Object.entries(status().counters.ignored)) this.inc({ reason }, n);
    },
  });
  new Counter({
    name: "hermes_telegram_replies_sent_total",
    help: "Messages Telegram accepted from this gateway's bot (answers, failure answers and the platform's own replies)",
    registers,
    collect() {
      this.reset();
      this.inc(status().replies_sent);
    },
  });
  new Counter({
    name: "hermes_telegram_errors_total",
    help: "Telegram errors by where (poll: a Bot API call of the poller; send: an answer that could not be sent; turn: a failed turn) and kind",
    labelNames: ["where", "kind"] as const,
    registers,
    collect() {
      this.reset();
      for (const { where, kind, count } of status().errors) this.inc({ where, kind }, count);
    },
  });
  new Gauge({
    name: "hermes_telegram_poller_state",
    help: "1 for the state the Telegram poller is in (polling, standby, conflict, backoff, starting, stopped)",
    labelNames: ["state"] as const,
    registers,
    collect() {
      const current = status().state;
      for (const state of POLLER_STATES) this.set({ state }, state === current ? 1 : 0);
    },
  });
}
