import { z } from "zod";
import type { ChatMessage } from "../../agents/core/provider.js";
import { utf8Bytes } from "./canonical-json.js";
import { MAX_MEMBERS, MAX_NAME_CHARS, MAX_TEXT_BYTES } from "./limits.js";
import type { RoomEvent } from "./types.js";
import { checkId, checkMembers, type Member } from "./validation.js";

/**
 * One member turn of a discussion as it travels from the room's authority to the
 * gateway the member lives on (in process, over gRPC `RunMemberTurn`, or through the relay
 * tunnel): the room, the turn, and the recent room messages up to what the member may see. The
 * member's gateway needs no copy of the room: everything the turn reads is in the request.
 */
export interface MemberTurnRequest {
  room_id: string;
  room_name: string;
  authority: { gateway_id: string; epoch: number };
  turn_id: string;
  member: Member;
  members: Member[];
  seen_through_seq: number;
  /** Room messages, oldest first, ending at or before seen_through_seq. */
  transcript: TranscriptMessage[];
}

export interface TranscriptMessage {
  seq: number;
  event_id: string;
  author_kind: "user" | "member";
  /** The member id of a member message; the user actor's id otherwise. */
  author_id: string;
  author_name?: string | undefined;
  text: string;
}

/** What the member's gateway answers: the raw reply (the authority decides whether it is a pass). */
export interface MemberTurnResult {
  turn_id: string;
  reply: string;
  model: string;
  provider: string;
  session_id: string;
  fallback_used: boolean;
}

/** Messages a member turn carries at most, newest kept. */
export const TRANSCRIPT_MAX_MESSAGES = 40;
/** Bytes of message text a member turn carries at most (the newest message always goes). */
export const TRANSCRIPT_MAX_BYTES = 256 * 1024;

function parseObject(text: string): Record<string, unknown> {
  try {
    const v = JSON.parse(text) as unknown;
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** A room event as a transcript message, or undefined for anything that is not a message. */
export function transcriptMessage(event: RoomEvent): TranscriptMessage | undefined {
  if (event.kind !== "message.user" && event.kind !== "message.member") return undefined;
  const text = parseObject(event.payload_json).text;
  const actor = parseObject(event.actor_json);
  const name = typeof actor.display_name === "string" && actor.display_name.length > 0 ? actor.display_name : undefined;
  return {
    seq: event.seq,
    event_id: event.event_id,
    author_kind: event.kind === "message.user" ? "user" : "member",
    author_id: typeof actor.id === "string" ? actor.id : "unknown",
    ...(name !== undefined ? { author_name: name } : {}),
    text: typeof text === "string" ? text : "",
  };
}

/**
 * The newest room messages up to `throughSeq`, bounded by count and bytes (the newest message is
 * always kept), oldest first.
 */
export function transcriptWindow(
  events: readonly RoomEvent[],
  throughSeq: number,
  limits: { max_messages?: number; max_bytes?: number } = {},
): TranscriptMessage[] {
  const maxMessages = limits.max_messages ?? TRANSCRIPT_MAX_MESSAGES;
  const maxBytes = limits.max_bytes ?? TRANSCRIPT_MAX_BYTES;
  const out: TranscriptMessage[] = [];
  let bytes = 0;
  for (let i = events.length - 1; i >= 0 && out.length < maxMessages; i--) {
    const e = events[i]!;
    if (e.seq > throughSeq) continue;
    const m = transcriptMessage(e);
    if (!m) continue;
    const size = utf8Bytes(m.text);
    if (out.length > 0 && bytes + size > maxBytes) break;
    bytes += size;
    out.push(m);
  }
  return out.reverse();
}

/** A handle a provider accepts as a message `name`: the profile of a member, `user` for the human. */
function handleOf(message: TranscriptMessage, members: readonly Member[]): string {
  if (message.author_kind === "user") return "user";
  return members.find((m) => m.member_id === message.author_id)?.profile ?? message.author_id;
}

function displayOf(message: TranscriptMessage, members: readonly Member[]): string {
  if (message.author_kind === "user") return message.author_name ?? "user";
  const member = members.find((m) => m.member_id === message.author_id);
  return member?.display_name ?? member?.profile ?? message.author_name ?? message.author_id;
}

/**
 * The room as the member's model reads it: its own earlier replies as assistant messages, everyone
 * else's as user messages named by their handle (`user` for the human). Other members' messages
 * start with `[Name]` so a model that ignores `name` still knows who spoke.
 */
export function roomChatMessages(request: Pick<MemberTurnRequest, "member" | "members" | "transcript">): ChatMessage[] {
  return request.transcript.map((m) => {
    if (m.author_kind === "member" && m.author_id === request.member.member_id) return { role: "assistant", content: m.text };
    const name = handleOf(m, request.members);
    const content = m.author_kind === "member" ? `[${displayOf(m, request.members)}] ${m.text}` : m.text;
    return { role: "user", content, name };
  });
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

/** The room part of a member's system prompt (sent per turn, never stored): who is here and how to pass. */
export function roomTurnPrompt(request: Pick<MemberTurnRequest, "room_name" | "member" | "members">): string {
  const others = request.members
    .filter((m) => m.member_id !== request.member.member_id)
    .map((m) => `- ${oneLine(m.display_name ?? m.profile)} (@${m.profile})`);
  return [
    `## Group room "${oneLine(request.room_name)}"`,
    `You are @${request.member.profile} in a group room with the user and these members:`,
    ...(others.length > 0 ? others : ["- (nobody else)"]),
    "Messages from other members start with their name in brackets. Answer the room in your own voice and keep it short.",
    "If you have nothing to add, or the latest message is addressed to someone else, reply with exactly (pass).",
    "Mention a member as @handle to bring them in. Write @user when you need the human to answer or decide something.",
  ].join("\n");
}

// ---------------------------------------------------------------------------------------------
// Validation at the edge (gRPC handler and relay tunnel)

const memberShape = z
  .object({
    member_id: z.string(),
    profile: z.string(),
    gateway_id: z.string().optional(),
    display_name: z.string().max(MAX_NAME_CHARS).optional(),
  })
  .strip();

const requestSchema = z
  .object({
    room_id: z.string(),
    room_name: z.string().max(MAX_NAME_CHARS * 4),
    authority: z.object({ gateway_id: z.string(), epoch: z.number().int().positive() }),
    turn_id: z.string(),
    member: memberShape,
    members: z.array(memberShape).max(MAX_MEMBERS),
    seen_through_seq: z.number().int().nonnegative(),
    transcript: z
      .array(
        z.object({
          seq: z.number().int().positive(),
          event_id: z.string().max(256),
          author_kind: z.enum(["user", "member"]),
          author_id: z.string().max(256),
          author_name: z
            .string()
            .max(MAX_NAME_CHARS * 4)
            .optional(),
          text: z.string(),
        }),
      )
      .max(TRANSCRIPT_MAX_MESSAGES * 4),
  })
  .strip();

export type CheckedTurnRequest = { ok: true; value: MemberTurnRequest } | { ok: false; message: string; field: string };

/** Parses a member-turn request from the wire: shape by zod, ids, members and text sizes by the room rules. */
export function checkMemberTurnRequest(raw: unknown): CheckedTurnRequest {
  const parsed = requestSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue && issue.path.length > 0 ? issue.path.join(".") : "request";
    return { ok: false, field, message: `${field}: ${issue?.message ?? "invalid"}` };
  }
  const v = parsed.data;
  for (const [field, value] of [
    ["room_id", v.room_id],
    ["turn_id", v.turn_id],
    ["authority.gateway_id", v.authority.gateway_id],
  ] as const) {
    const checked = checkId(value, field);
    if (!checked.ok) return { ok: false, field, message: checked.refusal.message };
  }
  const members = checkMembers(v.members);
  if (!members.ok) return { ok: false, field: "members", message: members.refusal.message };
  const member = members.value.find((m) => m.member_id === v.member.member_id && m.profile === v.member.profile);
  if (!member) return { ok: false, field: "member", message: `member ${v.member.member_id} is not one of the room's members` };
  let bytes = 0;
  for (const m of v.transcript) {
    const size = utf8Bytes(m.text);
    if (size > MAX_TEXT_BYTES)
      return { ok: false, field: "transcript", message: `a transcript message is ${size} bytes; the limit is ${MAX_TEXT_BYTES}` };
    bytes += size;
  }
  if (bytes > TRANSCRIPT_MAX_BYTES + MAX_TEXT_BYTES) {
    return {
      ok: false,
      field: "transcript",
      message: `the transcript is ${bytes} bytes; the limit is ${TRANSCRIPT_MAX_BYTES + MAX_TEXT_BYTES}`,
    };
  }
  const transcript: TranscriptMessage[] = v.transcript.map((m) => ({
    seq: m.seq,
    event_id: m.event_id,
    author_kind: m.author_kind,
    author_id: m.author_id,
    ...(m.author_name !== undefined ? { author_name: m.author_name } : {}),
    text: m.text,
  }));
  return {
    ok: true,
    value: {
      room_id: v.room_id,
      room_name: v.room_name,
      authority: v.authority,
      turn_id: v.turn_id,
      member,
      members: members.value,
      seen_through_seq: v.seen_through_seq,
      transcript,
    },
  };
}

/**
 * A reply as it goes into `message.member`: at most 64 KiB of UTF-8 (cut at a code point, marked),
 * so an overlong model answer is kept rather than failing the turn.
 */
export function fitReply(reply: string): string {
  if (utf8Bytes(reply) <= MAX_TEXT_BYTES) return reply;
  const marker = "… [truncated]";
  const budget = MAX_TEXT_BYTES - utf8Bytes(marker);
  let out = "";
  let bytes = 0;
  for (const ch of reply) {
    const size = utf8Bytes(ch);
    if (bytes + size > budget) break;
    out += ch;
    bytes += size;
  }
  return out + marker;
}
