import { createHash } from "node:crypto";
import { MESSAGE_AGENT_TOOL_NAME } from "../../delivery/core/message-agent-tool.js";
import type { ChatMessage, Provider, ToolCall, TurnRequest, TurnResult } from "./provider.js";

export type { ChatMessage, Provider, ToolCall, ToolSpec, TurnRequest, TurnResult } from "./provider.js";
export { ProviderError } from "./provider.js";

/** Who the local provider speaks as: the profile's display name, title and SOUL text. */
export interface Persona {
  display_name: string;
  handle: string;
  title?: string | undefined;
  soul?: string | undefined;
}

export const PASS = "(pass)";
const QUOTE_LIMIT = 200;
const ATTRIBUTION = /^Message from 🤖 (.+?) \(@([^)\s]+)\): ([\s\S]*)$/u;
const FAILED_DELIVERY = /^Delivery to (\S+) failed \[reason: ([a-z_]+)\]: ([\s\S]*)$/;
const MENTION = /@([A-Za-z0-9][A-Za-z0-9._:-]*)/g;
const TARGET = "@?([A-Za-z0-9][A-Za-z0-9._-]*(?:[@/][A-Za-z0-9][A-Za-z0-9._-]*)?)";
/** Words that follow "ask"/"tell"/"message" in prose without naming a bot. */
const NOT_A_TARGET = new Set(
  "a about an anyone around everyone for her him how if it me myself someone that the them this us what when whether who why you yourself".split(
    " ",
  ),
);

/**
 * The deterministic `local` provider: no network, the same output for the same input, good
 * enough to demo rooms and delivery. It answers in the bot's persona, passes in a room when the
 * newest message addresses someone else, calls `message_agent` when asked to reach a teammate, and
 * reads the transcript for simple context questions.
 */
export class LocalProvider implements Provider {
  readonly name = "local";

  constructor(private readonly persona: Persona) {}

  async complete(request: TurnRequest): Promise<TurnResult> {
    return localTurn(this.persona, request);
  }
}

function slug(text: string): string {
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, "-")
    .replace(/^-+|-+$/g, "");
}

/** The names a persona answers to in a mention: its handle and display-name slugs, plus the room-wide ones. */
function selfNames(persona: Persona): Set<string> {
  const s = slug(persona.display_name);
  return new Set([persona.handle.toLowerCase(), s, s.replace(/-/g, ""), "all", "everyone"].filter((n) => n.length > 0));
}

function mentions(text: string): string[] {
  return [...text.matchAll(MENTION)].map((m) => m[1]!.replace(/[.:,-]+$/, "").toLowerCase());
}

function quote(text: string): string {
  const points = [...text.trim()];
  return points.length > QUOTE_LIMIT ? `${points.slice(0, QUOTE_LIMIT).join("")}…` : points.join("");
}

function firstSentence(text: string | undefined): string {
  if (!text) return "";
  const line = text.trim().split(/\n/)[0] ?? "";
  const match = /^(.{1,240}?[.!?])(\s|$)/u.exec(line);
  return (match ? match[1]! : line.slice(0, 240)).trim();
}

function intro(persona: Persona): string {
  return persona.title ? `${persona.display_name} (${persona.title})` : persona.display_name;
}

function text(t: string): TurnResult {
  return { kind: "text", text: t };
}

interface Incoming {
  body: string;
  from?: { name: string; handle: string };
}

function unwrap(content: string): Incoming {
  const m = ATTRIBUTION.exec(content);
  return m ? { body: m[3]!, from: { name: m[1]!, handle: m[2]! } } : { body: content };
}

function callId(parts: unknown[]): string {
  return `call_${createHash("sha256").update(JSON.stringify(parts)).digest("hex").slice(0, 16)}`;
}

interface Delegation {
  target: string;
  message: string;
}

function trimEnd(s: string): string {
  return s.trim().replace(/[.!?]+$/u, "");
}

/** "ask @bob to …", "tell bob: …", "tell bob that …", "message bob …", "send bob a message: …" (no `g` flag: `exec` keeps no state). */
const DELEGATIONS: readonly [RegExp, (target: string, rest: string) => string][] = [
  [new RegExp(String.raw`\bask\s+${TARGET}\s+to\s+([\s\S]+)`, "i"), (_t, rest) => `Could you ${trimEnd(rest)}?`],
  [new RegExp(String.raw`\bask\s+${TARGET}\s*[:,]\s*([\s\S]+)`, "i"), (_t, rest) => rest.trim()],
  [new RegExp(String.raw`\btell\s+${TARGET}\s*(?::|,|\bthat\b)\s*([\s\S]+)`, "i"), (_t, rest) => rest.trim()],
  [new RegExp(String.raw`\bsend\s+${TARGET}\s+(?:a\s+)?message\s*[:,]?\s*([\s\S]+)`, "i"), (_t, rest) => rest.trim()],
  [new RegExp(String.raw`\bmessage\s+${TARGET}\s*[:,]?\s+([\s\S]+)`, "i"), (_t, rest) => rest.trim()],
];

/** The teammate and message a request to reach one names, if it names one. */
export function findDelegation(body: string, persona: Persona): Delegation | undefined {
  const self = persona.handle.toLowerCase();
  for (const [pattern, compose] of DELEGATIONS) {
    const m = pattern.exec(body);
    if (!m) continue;
    const target = m[1]!;
    const rest = m[2]!;
    if (NOT_A_TARGET.has(target.toLowerCase()) || target.toLowerCase() === self || rest.trim().length === 0) continue;
    return { target, message: compose(target, rest) };
  }
  return undefined;
}

function previousUserMessages(messages: readonly ChatMessage[]): string[] {
  return messages.filter((m) => m.role === "user").map((m) => unwrap(m.content).body);
}

/**
 * Simple questions about the conversation so far, answered from the transcript. The earlier user
 * messages are unwrapped only for a question that needs them (a long chat has many).
 */
function answerFromTranscript(body: string, messages: readonly ChatMessage[]): string | undefined {
  let unwrapped: string[] | undefined;
  const earlierMessages = () => {
    unwrapped ??= previousUserMessages(messages).slice(0, -1);
    return unwrapped;
  };
  if (/\b(what did i (just )?say|what was my (last|previous) message|repeat (that|my last message))\b/i.test(body)) {
    const prev = earlierMessages().at(-1);
    return prev === undefined ? "This is the first thing you've said to me in this chat." : `You said: "${quote(prev)}".`;
  }
  if (/\bwhat(?:'s| is) my name\b/i.test(body)) {
    for (const m of [...earlierMessages()].reverse()) {
      const name = /\b(?:my name is|call me)\s+([\p{L}\p{N}_'-]+)/iu.exec(m);
      if (name) return `Your name is ${name[1]}.`;
    }
    return "You haven't told me your name yet.";
  }
  if (/\bwhat did i ask you to remember\b/i.test(body)) {
    for (const m of [...earlierMessages()].reverse()) {
      const note = /\bremember(?: that)?\s+([\s\S]+)/i.exec(m);
      if (note) return `You asked me to remember: "${quote(trimEnd(note[1]!))}".`;
    }
    return "You haven't asked me to remember anything yet.";
  }
  const remember = /^\s*(?:please\s+)?remember(?: that)?\s+([\s\S]+)/i.exec(body);
  if (remember) return `Noted: "${quote(trimEnd(remember[1]!))}".`;
  if (/\bhow many messages\b/i.test(body)) {
    const n = earlierMessages().length + 1;
    return `You've sent me ${n} message${n === 1 ? "" : "s"} in this chat.`;
  }
  const said = /\bwhat did @?([A-Za-z0-9][A-Za-z0-9._-]*) (?:say|reply|answer|write)\b/i.exec(body);
  if (said) {
    const handle = said[1]!.toLowerCase();
    for (const m of [...messages].reverse()) {
      if (m.role !== "user") continue;
      const u = unwrap(m.content);
      if (u.from?.handle.toLowerCase() === handle || m.name?.toLowerCase() === handle)
        return `${u.from?.name ?? m.name} said: "${quote(u.body)}".`;
    }
    return `I haven't heard from ${said[1]} in this chat.`;
  }
  return undefined;
}

function toolResultAnswer(request: TurnRequest, last: Extract<ChatMessage, { role: "tool" }>): TurnResult {
  const call = request.messages
    .flatMap((m) => (m.role === "assistant" ? (m.tool_calls ?? []) : []))
    .find((c) => c.id === last.tool_call_id);
  const name = call?.name ?? last.name ?? "tool";
  if (name !== MESSAGE_AGENT_TOOL_NAME) return text(`The ${name} tool returned: "${quote(last.content)}".`);
  let target = "the teammate";
  try {
    const args = JSON.parse(call?.arguments ?? "{}") as { target?: unknown };
    if (typeof args.target === "string") target = args.target;
  } catch {
    // Keep the generic name; the result below is still reported.
  }
  let result: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(last.content) as unknown;
    if (parsed && typeof parsed === "object") result = parsed as Record<string, unknown>;
  } catch {
    return text(`I tried to message ${target}; the tool said: "${quote(last.content)}".`);
  }
  if (typeof result["error"] === "string") {
    const reason = typeof result["reason"] === "string" ? ` [reason: ${result["reason"]}]` : "";
    return text(`I couldn't message ${target}${reason}: ${result["error"]}`);
  }
  const id = typeof result["delivery_id"] === "string" ? ` (delivery ${result["delivery_id"]})` : "";
  return text(`I've sent your message to ${target}${id}. I'll pass on the reply when it arrives.`);
}

/** Room turns: speak when addressed, or when the human wrote to nobody in particular and I have not answered yet. */
function shouldPassInRoom(persona: Persona, messages: readonly ChatMessage[]): boolean {
  const mine = selfNames(persona);
  let lastOther = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role === "user" && (m.name === undefined || !mine.has(m.name.toLowerCase()))) {
      lastOther = i;
      break;
    }
  }
  if (lastOther < 0) return true;
  const m = messages[lastOther] as Extract<ChatMessage, { role: "user" }>;
  const named = mentions(m.content);
  if (named.some((n) => mine.has(n))) return false;
  if (named.length > 0) return true;
  const fromBot = m.name !== undefined && m.name.toLowerCase() !== "user";
  if (fromBot) return true;
  const answeredSince = messages.slice(lastOther + 1).some((later) => later.role === "assistant");
  return answeredSince;
}

/** The local provider's turn as a pure function. */
export function localTurn(persona: Persona, request: TurnRequest): TurnResult {
  const messages = request.messages;
  const last = messages.at(-1);
  if (request.turn_kind === "room" && shouldPassInRoom(persona, messages)) return text(PASS);
  if (last === undefined) return text(`${intro(persona)} here. ${firstSentence(persona.soul)}`.trim());
  if (last.role === "tool") return toolResultAnswer(request, last);
  if (last.role === "assistant") return text(request.turn_kind === "room" ? PASS : "");

  const incoming = unwrap(last.content);
  const failed = FAILED_DELIVERY.exec(incoming.body);
  if (failed) return text(`My message to ${failed[1]} did not get through (reason: ${failed[2]}): ${failed[3]}`);

  const canMessage = (request.tools ?? []).some((t) => t.name === MESSAGE_AGENT_TOOL_NAME);
  if (request.turn_kind !== "room") {
    const delegation = findDelegation(incoming.body, persona);
    if (delegation && canMessage) {
      const call: ToolCall = {
        id: callId([messages.length, delegation.target, delegation.message]),
        name: MESSAGE_AGENT_TOOL_NAME,
        arguments: JSON.stringify({ target: delegation.target, message: delegation.message }),
      };
      return { kind: "tool_calls", tool_calls: [call], text: `Asking ${delegation.target}.` };
    }
    if (delegation)
      return text(`I can't message other bots from this chat; ask me in my Bot Chat and I'll pass it to ${delegation.target}.`);
  }

  if (/\b(who are you|introduce yourself)\b/i.test(incoming.body)) {
    return text(`I'm ${intro(persona)}, @${persona.handle}. ${firstSentence(persona.soul)}`.trim());
  }
  const fromTranscript = answerFromTranscript(incoming.body, messages);
  if (fromTranscript !== undefined) return text(fromTranscript);

  const greeting = incoming.from ? `Hi ${incoming.from.name}, ${intro(persona)} here.` : `${intro(persona)} here.`;
  const soul = firstSentence(persona.soul);
  return text(`${greeting} You said: "${quote(incoming.body)}".${soul ? ` ${soul}` : ""}`);
}
