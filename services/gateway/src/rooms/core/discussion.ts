import { createHash } from "node:crypto";
import type { EventKind, RoomEvent } from "./types.js";
import type { Member } from "./validation.js";

/**
 * The discussion policy of a room, as pure functions of the room log: what the
 * driver does next is decided from the events since the newest user message and nothing else,
 * so a restarted (or newly promoted) authority decides exactly what the old one would have.
 *
 * - A user message (`message.user`) opens a discussion: up to `max_rounds` (3) serial rounds of
 *   member turns, at most `max_replies` (10) member replies in all.
 * - Round responders are the members mentioned so far (in the user message and in the replies of
 *   earlier rounds, accumulating); when nobody is mentioned, everybody. `@all` / `@everyone` name
 *   everybody; `@user` names the human (it raises the room's needs-you flag, never a turn).
 * - A member runs only when the log holds a message it has not seen (written by someone else
 *   after the point its last turn saw through).
 * - A reply that is empty or `(pass)` / `pass` / `pass.` (any case) is a pass: `turn.settled
 *   {passed: true}`, no message. A round in which nobody replied settles the discussion.
 * - Turn ids are deterministic (`d<seq>.r<round>.p<index>.s<seen>.m<hash>`), so every event the
 *   driver appends has an id derived from the log, and appending it twice is idempotent.
 */

export const MAX_DISCUSSION_ROUNDS = 3;
export const MAX_DISCUSSION_REPLIES = 10;

export interface DiscussionLimits {
  max_rounds: number;
  max_replies: number;
}

export const DEFAULT_DISCUSSION_LIMITS: DiscussionLimits = { max_rounds: MAX_DISCUSSION_ROUNDS, max_replies: MAX_DISCUSSION_REPLIES };

/** `turn.failed` reason of a turn ended (or never started) because an operator stopped the discussion. */
export const STOPPED_REASON = "discussion_stopped";
/** `turn.failed` reason of a turn found started but never ended: its gateway went away mid-turn. */
export const ORPHANED_REASON = "runtime_offline";

// ---------------------------------------------------------------------------------------------
// Pass and mentions

const PASS_REPLIES = new Set(["", "(pass)", "pass", "pass."]);

/** A reply that says nothing: empty, or exactly `(pass)`, `pass`, `pass.` (case-insensitive, trimmed). */
export function isPass(reply: string): boolean {
  return PASS_REPLIES.has(reply.trim().toLowerCase());
}

const MENTION_RE = /@([A-Za-z0-9][A-Za-z0-9._:-]*)/g;
/** Reserved mention of the human in the room. */
export const USER_MENTION = "user";
const ROOM_MENTIONS = new Set(["all", "everyone"]);

/** The raw mention tokens of a text, lower-cased, without trailing punctuation (`@bob.` → `bob`). */
export function mentionTokens(text: string): string[] {
  const out: string[] = [];
  for (const match of text.matchAll(MENTION_RE)) {
    const token = match[1]!.replace(/[._:-]+$/, "").toLowerCase();
    if (token.length > 0) out.push(token);
  }
  return out;
}

function slug(text: string): string {
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, "-")
    .replace(/^-+|-+$/g, "");
}

function withoutSeparators(text: string): string {
  return text.replace(/[._:-]+/g, "");
}

/**
 * How mentions name members: an exact member id first; otherwise an alias (the profile name, the
 * display name as a slug, either without separators), and only when exactly one member has it —
 * a colliding alias names nobody rather than the wrong bot.
 */
export class MentionResolver {
  private readonly ids = new Map<string, string>();
  private readonly aliases = new Map<string, Set<string>>();

  constructor(readonly members: readonly Member[]) {
    for (const m of members) this.ids.set(m.member_id.toLowerCase(), m.member_id);
    const add = (alias: string, memberId: string) => {
      if (alias.length === 0) return;
      let set = this.aliases.get(alias);
      if (!set) {
        set = new Set();
        this.aliases.set(alias, set);
      }
      set.add(memberId);
    };
    for (const m of members) {
      const names = [m.member_id.toLowerCase(), m.profile.toLowerCase(), ...(m.display_name ? [slug(m.display_name)] : [])];
      for (const name of names) {
        add(name, m.member_id);
        add(withoutSeparators(name), m.member_id);
      }
    }
  }

  /** The member a token names, or undefined (unknown, reserved, or ambiguous). */
  member(token: string): string | undefined {
    const exact = this.ids.get(token);
    if (exact !== undefined) return exact;
    if (token === USER_MENTION || ROOM_MENTIONS.has(token)) return undefined;
    for (const key of [token, withoutSeparators(token)]) {
      const owners = this.aliases.get(key);
      if (owners && owners.size === 1) return [...owners][0];
      if (owners && owners.size > 1) return undefined;
    }
    return undefined;
  }

  /** What a text addresses: members by id, everybody (`@all`), the human (`@user`). */
  resolve(text: string): Mentions {
    const members = new Set<string>();
    let all = false;
    let user = false;
    for (const token of mentionTokens(text)) {
      if (token === USER_MENTION && !this.ids.has(token)) user = true;
      else if (ROOM_MENTIONS.has(token)) all = true;
      else {
        const id = this.member(token);
        if (id !== undefined) members.add(id);
      }
    }
    return { members, all, user };
  }
}

export interface Mentions {
  members: Set<string>;
  all: boolean;
  user: boolean;
}

// ---------------------------------------------------------------------------------------------
// Turns: ids and payloads

/** A member turn as the driver plans, runs and logs it. */
export interface TurnPlan {
  turn_id: string;
  /** The user message this discussion answers. */
  discussion_event_id: string;
  discussion_seq: number;
  member_id: string;
  /** Index of the member in the room's member list. */
  member_index: number;
  round_index: number;
  /** The member sees the log up to here (the last seq when the turn was planned). */
  seen_through_seq: number;
  /** The thread of the user message, carried to the reply. */
  thread_id?: string | undefined;
}

/** `d<discussion seq>.r<round>.p<member index>.s<seen through>.m<24 hex of room, discussion, member>`. */
export function turnIdOf(roomId: string, plan: Omit<TurnPlan, "turn_id" | "thread_id">): string {
  const digest = createHash("sha256").update(`${roomId}\n${plan.discussion_event_id}\n${plan.member_id}`).digest("hex").slice(0, 24);
  return `d${plan.discussion_seq}.r${plan.round_index}.p${plan.member_index}.s${plan.seen_through_seq}.m${digest}`;
}

/** The event ids of one turn's events: derived from the turn id, so a repeated append is idempotent. */
export function turnEventIds(turnId: string): { started: string; message: string; settled: string; failed: string } {
  return {
    started: `turn:${turnId}:started`,
    message: `turn:${turnId}:message`,
    settled: `turn:${turnId}:settled`,
    failed: `turn:${turnId}:failed`,
  };
}

/** The fields every turn event carries (upstream's turn terminal fields). */
export function turnFields(plan: TurnPlan): Record<string, unknown> {
  const fields: Record<string, unknown> = {
    turn_id: plan.turn_id,
    discussion_event_id: plan.discussion_event_id,
    discussion_seq: plan.discussion_seq,
    member_id: plan.member_id,
    member_index: plan.member_index,
    round_index: plan.round_index,
    seen_through_seq: plan.seen_through_seq,
  };
  if (plan.thread_id !== undefined) fields.thread_id = plan.thread_id;
  return fields;
}

// ---------------------------------------------------------------------------------------------
// Reading the log

type TurnState = "open" | "replied" | "passed" | "failed";

/** One member turn as the log tells it. */
export interface TurnRecord {
  turn_id: string;
  discussion_seq: number;
  member_id: string;
  member_index: number;
  round_index: number;
  seen_through_seq: number;
  /** Seq of turn.started; null for a turn that never started (a stop marker). */
  started_seq: number | null;
  state: TurnState;
  reason_code?: string | undefined;
  /** The reply (state "replied"), when its message.member is in the events read. */
  text?: string | undefined;
  /** The seq that ended the turn (settled or failed). */
  ended_seq?: number | undefined;
}

interface TurnPayload {
  turn_id: string;
  discussion_seq: number;
  member_id: string;
  member_index: number;
  round_index: number;
  seen_through_seq: number;
  passed?: boolean;
  reason_code?: string;
}

function parseJson(text: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(text) as unknown;
    return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

const isCount = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;

/** The turn fields of a turn.* payload, or undefined when it is not one this policy wrote (ignored, never a crash). */
function turnPayload(event: RoomEvent): TurnPayload | undefined {
  const p = parseJson(event.payload_json);
  if (!p) return undefined;
  const { turn_id, discussion_seq, member_id, member_index, round_index, seen_through_seq } = p;
  if (typeof turn_id !== "string" || typeof member_id !== "string") return undefined;
  if (!isCount(discussion_seq) || !isCount(member_index) || !isCount(round_index) || !isCount(seen_through_seq)) return undefined;
  return {
    turn_id,
    discussion_seq,
    member_id,
    member_index,
    round_index,
    seen_through_seq,
    ...(typeof p.passed === "boolean" ? { passed: p.passed } : {}),
    ...(typeof p.reason_code === "string" ? { reason_code: p.reason_code } : {}),
  };
}

/** Who wrote a message event: the member id of a message.member, or null for anybody else. */
function memberAuthor(event: RoomEvent): string | null {
  if (event.kind !== "message.member") return null;
  const actor = parseJson(event.actor_json);
  return typeof actor?.id === "string" ? actor.id : null;
}

function messageText(event: RoomEvent): string {
  const text = parseJson(event.payload_json)?.text;
  return typeof text === "string" ? text : "";
}

const MESSAGE_KINDS: ReadonlySet<EventKind> = new Set(["message.user", "message.member"]);

export function isMessage(event: RoomEvent): boolean {
  return MESSAGE_KINDS.has(event.kind);
}

/** Every turn in `events`, in the order they first appear (any discussion). */
export function readTurns(events: readonly RoomEvent[]): TurnRecord[] {
  const turns = new Map<string, TurnRecord>();
  const texts = new Map<string, string>();
  for (const event of events) {
    if (event.kind === "message.member") {
      const turnId = parseJson(event.payload_json)?.turn_id;
      if (typeof turnId === "string") texts.set(turnId, messageText(event));
      continue;
    }
    if (event.kind !== "turn.started" && event.kind !== "turn.settled" && event.kind !== "turn.failed") continue;
    const p = turnPayload(event);
    if (!p) continue;
    let turn = turns.get(p.turn_id);
    if (!turn) {
      turn = {
        turn_id: p.turn_id,
        discussion_seq: p.discussion_seq,
        member_id: p.member_id,
        member_index: p.member_index,
        round_index: p.round_index,
        seen_through_seq: p.seen_through_seq,
        started_seq: null,
        state: "open",
      };
      turns.set(p.turn_id, turn);
    }
    if (event.kind === "turn.started") turn.started_seq = event.seq;
    else if (event.kind === "turn.settled") {
      turn.state = p.passed === true ? "passed" : "replied";
      turn.ended_seq = event.seq;
    } else {
      turn.state = "failed";
      turn.reason_code = p.reason_code ?? "unknown";
      turn.ended_seq = event.seq;
    }
  }
  for (const turn of turns.values()) if (turn.state === "replied") turn.text = texts.get(turn.turn_id);
  return [...turns.values()];
}

/** Turns with turn.started and no terminal event: after a restart they are failed, never re-run. */
export function openTurns(events: readonly RoomEvent[]): TurnRecord[] {
  return readTurns(events).filter((t) => t.state === "open" && t.started_seq !== null);
}

/** Index of the newest `message.user` in `events`, or -1. */
export function lastUserMessageIndex(events: readonly RoomEvent[]): number {
  for (let i = events.length - 1; i >= 0; i--) if (events[i]!.kind === "message.user") return i;
  return -1;
}

/**
 * The needs-you flag: a member wrote `@user` after the newest user message (the human's next
 * message answers it and clears the flag).
 */
export function needsYou(members: readonly Member[], events: readonly RoomEvent[]): boolean {
  const resolver = new MentionResolver(members);
  const from = lastUserMessageIndex(events) + 1;
  for (let i = from; i < events.length; i++) {
    const e = events[i]!;
    if (e.kind === "message.member" && resolver.resolve(messageText(e)).user) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// The decision

export type DiscussionDecision =
  /** No user message in the events read: nothing to discuss. */
  | { kind: "idle" }
  /** Run this member's turn next. */
  | { kind: "turn"; turn: TurnPlan; replies: number }
  /** A turn of this discussion started and has not ended. */
  | { kind: "waiting"; turn: TurnRecord }
  /** A full round went by with no reply. */
  | { kind: "settled"; reason: "silent_round"; round_index: number; replies: number }
  /** A cap ended it. */
  | { kind: "bounded"; reason: "max_replies" | "max_rounds"; replies: number }
  /** An operator stopped it (a turn.failed with reason discussion_stopped). */
  | { kind: "stopped"; replies: number }
  /** None of the members can run here (no local profile, no route to their gateway). */
  | { kind: "no_members" };

export interface DiscussionInput {
  room_id: string;
  members: readonly Member[];
  /**
   * Events of the log up to its end that include the newest user message (events before it may be
   * there too and are ignored). In seq order.
   */
  events: readonly RoomEvent[];
  /** Member ids the driver can run now; the others are skipped like a member with nothing unseen. Default: all. */
  available?: ReadonlySet<string> | undefined;
  limits?: Partial<DiscussionLimits> | undefined;
}

/** Responders of a round: mentioned members in member order (or everybody), rotated by the round index. */
function roundOrder(members: readonly Member[], mentioned: ReadonlySet<string>, all: boolean, round: number): number[] {
  const indexes = members.map((_, i) => i).filter((i) => all || mentioned.size === 0 || mentioned.has(members[i]!.member_id));
  if (indexes.length === 0) return indexes;
  const shift = round % indexes.length;
  return [...indexes.slice(shift), ...indexes.slice(0, shift)];
}

/** What the driver does next for the discussion of the newest user message. */
export function nextDiscussionAction(input: DiscussionInput): DiscussionDecision {
  const limits = { ...DEFAULT_DISCUSSION_LIMITS, ...input.limits };
  const { members, events } = input;
  const start = lastUserMessageIndex(events);
  if (start < 0) return { kind: "idle" };
  const available = input.available ?? new Set(members.map((m) => m.member_id));
  if (!members.some((m) => available.has(m.member_id))) return { kind: "no_members" };

  const trigger = events[start]!;
  const since = events.slice(start);
  const lastSeq = events[events.length - 1]!.seq;
  const turns = readTurns(since).filter((t) => t.discussion_seq === trigger.seq);
  const replies = turns.filter((t) => t.state === "replied").length;

  if (turns.some((t) => t.state === "failed" && t.reason_code === STOPPED_REASON)) return { kind: "stopped", replies };
  const open = turns.find((t) => t.state === "open" && t.started_seq !== null);
  if (open) return { kind: "waiting", turn: open };
  if (replies >= limits.max_replies) return { kind: "bounded", reason: "max_replies", replies };

  // Messages and their authors, to tell whether a member has something unseen.
  const messages = since.filter(isMessage).map((e) => ({ seq: e.seq, author: memberAuthor(e) }));
  const seenThrough = new Map<string, number>();
  for (const t of turns) {
    if (t.started_seq === null) continue;
    seenThrough.set(t.member_id, Math.max(seenThrough.get(t.member_id) ?? 0, t.seen_through_seq));
  }
  const hasUnseen = (memberId: string) => {
    const seen = seenThrough.get(memberId) ?? trigger.seq - 1;
    return messages.some((m) => m.seq > seen && m.author !== memberId);
  };

  const resolver = new MentionResolver(members);
  const first = resolver.resolve(messageText(trigger));
  const mentioned = new Set(first.members);
  let all = first.all;
  const threadId = parseJson(trigger.payload_json)?.thread_id;
  const currentRound = turns.reduce((max, t) => Math.max(max, t.round_index), 0);
  // Mentions of the replies of rounds before the current one.
  for (const t of turns) {
    if (t.round_index >= currentRound || t.state !== "replied") continue;
    const m = resolver.resolve(t.text ?? "");
    for (const id of m.members) mentioned.add(id);
    all ||= m.all;
  }

  for (let round = currentRound; round < limits.max_rounds; round++) {
    const order = roundOrder(members, mentioned, all, round);
    const inRound = turns.filter((t) => t.round_index === round);
    // Resume after the last member that had its turn in this round; the ones skipped before stay skipped.
    const last = inRound.at(-1);
    const from = last === undefined ? 0 : order.indexOf(last.member_index) + 1;
    for (let i = from; i < order.length; i++) {
      const index = order[i]!;
      const member = members[index]!;
      if (inRound.some((t) => t.member_id === member.member_id)) continue;
      if (!available.has(member.member_id) || !hasUnseen(member.member_id)) continue;
      const base = {
        discussion_event_id: trigger.event_id,
        discussion_seq: trigger.seq,
        member_id: member.member_id,
        member_index: index,
        round_index: round,
        seen_through_seq: lastSeq,
      };
      const turn: TurnPlan = {
        turn_id: turnIdOf(input.room_id, base),
        ...base,
        ...(typeof threadId === "string" ? { thread_id: threadId } : {}),
      };
      return { kind: "turn", turn, replies };
    }
    const spoken = inRound.filter((t) => t.state === "replied");
    if (spoken.length === 0) return { kind: "settled", reason: "silent_round", round_index: round, replies };
    if (round + 1 >= limits.max_rounds) return { kind: "bounded", reason: "max_rounds", replies };
    for (const t of spoken) {
      const m = resolver.resolve(t.text ?? "");
      for (const id of m.members) mentioned.add(id);
      all ||= m.all;
    }
  }
  return { kind: "bounded", reason: "max_rounds", replies };
}

// ---------------------------------------------------------------------------------------------
// Status (groups.state)

export type DiscussionState = "idle" | "running" | "settled" | "bounded" | "stopped" | "no_members";

export interface DiscussionSummary {
  state: DiscussionState;
  /** Why it ended: silent_round, max_replies, max_rounds. */
  reason?: string | undefined;
  /** The user message being discussed. */
  discussion_seq?: number | undefined;
  round_index?: number | undefined;
  replies: number;
  needs_you: boolean;
  /** The turn running now (or next). */
  turn?: { turn_id: string; member_id: string; round_index: number } | undefined;
}

/** The status `groups.state` shows, from the same decision the driver acts on. */
export function summarizeDiscussion(input: DiscussionInput): DiscussionSummary {
  const decision = nextDiscussionAction(input);
  const flag = needsYou(input.members, input.events);
  const start = lastUserMessageIndex(input.events);
  const discussion_seq = start >= 0 ? input.events[start]!.seq : undefined;
  switch (decision.kind) {
    case "idle":
      return { state: "idle", replies: 0, needs_you: flag };
    case "no_members":
      return { state: "no_members", discussion_seq, replies: 0, needs_you: flag };
    case "turn":
      return {
        state: "running",
        discussion_seq,
        round_index: decision.turn.round_index,
        replies: decision.replies,
        needs_you: flag,
        turn: { turn_id: decision.turn.turn_id, member_id: decision.turn.member_id, round_index: decision.turn.round_index },
      };
    case "waiting": {
      const t = decision.turn;
      const replies = readTurns(input.events.slice(start)).filter(
        (r) => r.discussion_seq === discussion_seq && r.state === "replied",
      ).length;
      return {
        state: "running",
        discussion_seq,
        round_index: t.round_index,
        replies,
        needs_you: flag,
        turn: { turn_id: t.turn_id, member_id: t.member_id, round_index: t.round_index },
      };
    }
    case "settled":
      return {
        state: "settled",
        reason: decision.reason,
        discussion_seq,
        round_index: decision.round_index,
        replies: decision.replies,
        needs_you: flag,
      };
    case "bounded":
      return { state: "bounded", reason: decision.reason, discussion_seq, replies: decision.replies, needs_you: flag };
    case "stopped":
      return { state: "stopped", discussion_seq, replies: decision.replies, needs_you: flag };
  }
}
