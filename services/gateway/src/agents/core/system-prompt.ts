import { MESSAGE_AGENT_TOOL_NAME } from "../../delivery/core/message-agent-tool.js";
import type { RemoteBot } from "../../delivery/core/targets.js";

export interface PersonaText {
  display_name: string;
  handle: string;
  title?: string | undefined;
  description?: string | undefined;
  soul?: string | undefined;
}

/** One teammate as the roster shows it: the exact target to use, and what they do. */
export interface RosterEntry {
  target: string;
  /** Shown when it says more than the target does (a remote bot's display name). */
  name?: string | undefined;
  title?: string | undefined;
  description?: string | undefined;
  /** Where the teammate runs when it is not this gateway ("peer gateway spark"). */
  where?: string | undefined;
  /** Its gateway is disconnected right now: mail is accepted but waits (up to its TTL). */
  offline?: boolean | undefined;
}

/** What the bot is told about mail to an offline teammate, so it does not expect a quick reply. */
export const OFFLINE_NOTE = "offline now: mail waits until its gateway is back, up to the delivery's TTL";

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

function teammateLine(entry: RosterEntry): string {
  const role = [entry.title, entry.description].map((t) => oneLine(t ?? "")).filter((t) => t.length > 0);
  const notes = [entry.name, entry.where, entry.offline ? OFFLINE_NOTE : ""].map((t) => oneLine(t ?? "")).filter((t) => t.length > 0);
  const where = notes.length > 0 ? ` (${notes.join("; ")})` : "";
  return `- ${entry.target}${where}${role.length > 0 ? `: ${role.join(" — ")}` : ""}`;
}

/**
 * A bot on another gateway as a roster line: `<handle>@<connection>`, its display name when that
 * is more than the handle, title and description, and whether its gateway is offline right now.
 */
export function relayTeammate(bot: RemoteBot): RosterEntry {
  const name = oneLine(bot.display_name ?? "");
  return {
    target: `${bot.handle}@${bot.connection}`,
    ...(name && name.toLowerCase() !== bot.handle.toLowerCase() ? { name } : {}),
    title: bot.title,
    description: bot.description,
    where: "via the relay",
    ...(bot.online === false ? { offline: true } : {}),
  };
}

/**
 * The bot's own system prompt: who it is (persona, SOUL.md) and, in its canonical Bot Chat only,
 * the teammate roster with the messaging protocol. The ephemeral channel prompt is added per
 * turn by composeSystemPrompt and is not part of this text. Deterministic for equal input, so the
 * agent signature (and the provider's prompt cache) stays stable across turns.
 */
export function buildSystemPrompt(persona: PersonaText, roster?: readonly RosterEntry[]): string {
  const title = oneLine(persona.title ?? "");
  const parts = [`You are ${oneLine(persona.display_name) || persona.handle} (@${persona.handle})${title ? `, ${title}` : ""}.`];
  const description = oneLine(persona.description ?? "");
  if (description) parts.push(description);
  const soul = (persona.soul ?? "").trim();
  if (soul) parts.push(soul);
  if (roster !== undefined) {
    const lines = [
      "## Teammates",
      `You can message a teammate with the ${MESSAGE_AGENT_TOOL_NAME} tool. Delivery is fire-and-forget: you get {"status": "queued", "delivery_id": …} at once,`,
      "and the reply arrives later in this chat as a message from that teammate, or as `Delivery to <target> failed [reason: <code>]: <error>`.",
      "Write your own message; do not forward the user's words verbatim. Use these exact targets:",
      ...(roster.length > 0 ? roster.map(teammateLine) : ["(no teammates yet)"]),
    ];
    parts.push(lines.join("\n"));
  }
  return parts.join("\n\n");
}
