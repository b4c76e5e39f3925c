import { ID_RULE } from "@hermes/contract";
import { z } from "zod";
import { canonicalJson, NotJsonError, utf8Bytes } from "./canonical-json.js";
import {
  MAX_ACTOR_BYTES,
  MAX_ID_CHARS,
  MAX_LOG_LIMIT,
  MAX_MEMBERS,
  MAX_NAME_CHARS,
  MAX_PAGE_MAX_BYTES,
  MAX_PAYLOAD_BYTES,
  MAX_TEXT_BYTES,
  MIN_LOG_LIMIT,
  MIN_MEMBERS,
  MIN_PAGE_MAX_BYTES,
} from "./limits.js";
import { type Refusal, refusal } from "./refusal.js";
import { type Actor, type ActorKind, EVENT_KINDS, type EventKind } from "./types.js";

/** Either the checked value or the refusal that explains what is wrong with the input. */
export type Checked<T> = { ok: true; value: T } | { ok: false; refusal: Refusal };

const ok = <T>(value: T): Checked<T> => ({ ok: true, value });
const no = <T>(r: Refusal): Checked<T> => ({ ok: false, refusal: r });

const ID_RE = new RegExp(ID_RULE);

/** Ids (room, event, gateway, member, thread): ≤128 chars of `[A-Za-z0-9._:@-]`, starting alphanumeric. */
export function checkId(value: unknown, field: string): Checked<string> {
  if (typeof value !== "string" || value.length === 0) {
    return no(refusal("invalid_params", `${field} is required and must be a non-empty string`, { field }));
  }
  if (value.length > MAX_ID_CHARS) {
    return no(
      refusal("invalid_params", `${field} is ${value.length} characters; ids are at most ${MAX_ID_CHARS}`, {
        field,
        limit: MAX_ID_CHARS,
        actual: value.length,
      }),
    );
  }
  if (!ID_RE.test(value)) {
    return no(
      refusal("invalid_params", `${field} ${JSON.stringify(value)} is not a valid id: it must match ${ID_RULE}`, {
        field,
        rule: ID_RULE,
      }),
    );
  }
  return ok(value);
}

/**
 * Prefixes of the event ids the server writes itself: `system:` (room.created, room.renamed,
 * room.disbanded, authority.claimed), `turn:` (the discussion driver's turn.* and message.member)
 * and `repost:` (reposts of preserved messages). A client id with one of them could squat the id
 * of a future disband, claim or turn, so client ids never start with them.
 */
export const RESERVED_EVENT_ID_PREFIXES = ["system:", "turn:", "repost:"] as const;

/** The reserved prefix `eventId` starts with, or undefined. */
export function reservedEventIdPrefix(eventId: string): string | undefined {
  // A plain loop: this runs for every client send, and a closure per call is garbage per send.
  for (const prefix of RESERVED_EVENT_ID_PREFIXES) if (eventId.startsWith(prefix)) return prefix;
  return undefined;
}

/** An event id a client chose (a send's idempotency key, a rename's): a valid id outside the reserved prefixes. */
export function checkClientEventId(value: unknown, field = "event_id"): Checked<string> {
  const id = checkId(value, field);
  if (!id.ok) return id;
  const prefix = reservedEventIdPrefix(id.value);
  if (prefix === undefined) return id;
  return no(
    refusal(
      "invalid_params",
      `${field} ${JSON.stringify(id.value)} starts with the reserved prefix ${prefix}: ids starting with ${RESERVED_EVENT_ID_PREFIXES.join(", ")} are written by the server itself; pick another ${field}`,
      { field, reserved_prefix: prefix },
    ),
  );
}

const REPOST_EVENT_ID_RE = /^repost:[0-9a-f]{40}$/;

/** The id of a repost: `repost:` and 40 hex digits (derived from the preserved event), nothing else. */
export function checkRepostEventId(value: unknown, field = "event_id"): Checked<string> {
  const id = checkId(value, field);
  if (!id.ok) return id;
  if (REPOST_EVENT_ID_RE.test(id.value)) return id;
  return no(
    refusal(
      "invalid_params",
      `${field} ${JSON.stringify(id.value)} is not a repost id (repost: and 40 hex digits of the preserved event)`,
      {
        field,
      },
    ),
  );
}

function codePoints(text: string): number {
  let count = 0;
  for (const _ of text) count++;
  return count;
}

// C0/C1 control characters, which would corrupt a terminal listing of rooms.
const CONTROL_RE = /[\u0000-\u001f\u007f-\u009f]/;

/** Room names: 1–200 code points, not blank, no control characters. */
export function checkRoomName(value: unknown): Checked<string> {
  if (typeof value !== "string" || value.trim().length === 0) {
    return no(refusal("invalid_params", "name is required: give the room a name", { field: "name" }));
  }
  const length = codePoints(value);
  if (length > MAX_NAME_CHARS) {
    return no(
      refusal("invalid_params", `name is ${length} characters; the limit is ${MAX_NAME_CHARS}`, {
        field: "name",
        limit: MAX_NAME_CHARS,
        actual: length,
      }),
    );
  }
  if (CONTROL_RE.test(value)) {
    return no(refusal("invalid_params", "name contains control characters; use plain text", { field: "name" }));
  }
  return ok(value);
}

/** A member of a discussion room: a profile (bot), possibly on another gateway. */
export interface Member {
  member_id: string;
  profile: string;
  gateway_id?: string;
  display_name?: string;
}

const memberSchema = z
  .object({
    member_id: z.string(),
    profile: z.string(),
    gateway_id: z.string().optional(),
    display_name: z.string().max(MAX_NAME_CHARS).optional(),
  })
  .strict();

/**
 * Members with their host gateway: a member listed without `gateway_id` is a profile of `writer`,
 * the gateway that wrote the list (the creator stamps its own id at create; older gateways left it
 * out for their own profiles).
 */
export function withHosts(members: readonly Member[], writer: string): Member[] {
  return members.map((member) => (member.gateway_id === undefined ? { ...member, gateway_id: writer } : member));
}

/** Members: 2–6 objects with valid, distinct member ids. */
export function checkMembers(value: unknown): Checked<Member[]> {
  if (!Array.isArray(value)) {
    return no(refusal("invalid_params", "members must be a list of {member_id, profile}", { field: "members" }));
  }
  if (value.length < MIN_MEMBERS || value.length > MAX_MEMBERS) {
    return no(
      refusal("invalid_params", `a room has ${MIN_MEMBERS}–${MAX_MEMBERS} members; ${value.length} given`, {
        field: "members",
        min: MIN_MEMBERS,
        max: MAX_MEMBERS,
        actual: value.length,
      }),
    );
  }
  const members: Member[] = [];
  const seen = new Set<string>();
  for (const [index, raw] of value.entries()) {
    const parsed = memberSchema.safeParse(raw);
    if (!parsed.success) {
      return no(
        refusal("invalid_params", `members[${index}] must be {member_id, profile, gateway_id?, display_name?}`, { field: "members" }),
      );
    }
    for (const field of ["member_id", "profile", "gateway_id"] as const) {
      const id = parsed.data[field];
      if (id === undefined) continue;
      const checked = checkId(id, `members[${index}].${field}`);
      if (!checked.ok) return no(checked.refusal);
    }
    if (seen.has(parsed.data.member_id)) {
      return no(refusal("invalid_params", `member ${parsed.data.member_id} is listed twice`, { field: "members" }));
    }
    seen.add(parsed.data.member_id);
    members.push(parsed.data);
  }
  return ok(members);
}

function checkText(value: unknown, field: string): Checked<string> {
  if (typeof value !== "string" || value.length === 0) {
    return no(refusal("invalid_params", `${field} is required and must be non-empty text`, { field }));
  }
  // UTF-8 takes at most 3 bytes per UTF-16 unit: a text short enough needs no count.
  const bytes = value.length * 3 <= MAX_TEXT_BYTES ? value.length : utf8Bytes(value);
  if (bytes > MAX_TEXT_BYTES) {
    return no(
      refusal("payload_too_large", `${field} is ${bytes} bytes; the limit is ${MAX_TEXT_BYTES} (64 KiB). Split it into several messages.`, {
        field,
        limit: MAX_TEXT_BYTES,
        actual: bytes,
      }),
    );
  }
  return ok(value);
}

/**
 * A character JSON.stringify escapes (`"`, `\\`, a control character below U+0020, a lone
 * surrogate), or any surrogate: a text without one is its own JSON string between quotes, and
 * this test is cheaper than JSON.stringify (every message is checked).
 */
const MAY_NEED_ESCAPE = /[^\u0020\u0021\u0023-\u005b\u005d-\ud7ff\ue000-\uffff]/;

function needsEscape(text: string): boolean {
  return MAY_NEED_ESCAPE.test(text);
}

/** Canonical JSON of a value that must be a plain object, or a refusal. */
function canonicalObject(value: unknown, field: string, limitBytes: number): Checked<string> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return no(refusal("invalid_params", `${field} must be a JSON object`, { field }));
  }
  let json: string;
  try {
    json = canonicalJson(value);
  } catch (err) {
    if (err instanceof NotJsonError) return no(refusal("invalid_params", `${field}: ${err.message}`, { field }));
    throw err;
  }
  const bytes = utf8Bytes(json);
  if (bytes > limitBytes) {
    return no(
      refusal("payload_too_large", `${field} is ${bytes} bytes of JSON; the limit is ${limitBytes}`, {
        field,
        limit: limitBytes,
        actual: bytes,
      }),
    );
  }
  return ok(json);
}

/** The kind of actor allowed to write each event kind (the actor of every kind but message.user is server-set). */
export const ACTOR_KIND_OF: Record<EventKind, ActorKind> = {
  "room.created": "system",
  "room.renamed": "system",
  "room.members_changed": "system",
  "room.disbanded": "system",
  "message.user": "user",
  "message.member": "member",
  "turn.started": "gateway",
  "turn.settled": "gateway",
  "turn.failed": "gateway",
  "authority.claimed": "system",
  "authority.lost": "system",
};

const EVENT_KIND_SET: ReadonlySet<unknown> = new Set(EVENT_KINDS);

export function isEventKind(value: unknown): value is EventKind {
  return EVENT_KIND_SET.has(value);
}

const ACTOR_KINDS = new Set<string>(["user", "member", "gateway", "system"]);
const ACTOR_OPTIONAL_FIELDS = new Set(["display_name", "profile", "connection_id"]);

/**
 * Accepted actors by object, per event kind: a connection's actor is one object used for every
 * send, so its canonical JSON is computed once (and the one result object is handed out again).
 * Actors are values; callers never mutate one after using it (the service freezes its own).
 */
const acceptedActors = new WeakMap<object, Map<EventKind, Checked<string>>>();

/**
 * Canonical actor JSON for an event kind, checking the actor kind the event kind requires. Written
 * by hand rather than with zod: it runs on every append and is a hot path of group commit.
 */
export function checkActor(kind: EventKind, actor: unknown): Checked<string> {
  if (actor !== null && typeof actor === "object") {
    const known = acceptedActors.get(actor)?.get(kind);
    if (known !== undefined) return known;
  }
  const checked = checkActorUncached(kind, actor);
  if (checked.ok && actor !== null && typeof actor === "object") {
    let byKind = acceptedActors.get(actor);
    if (byKind === undefined) {
      byKind = new Map();
      acceptedActors.set(actor, byKind);
    }
    byKind.set(kind, checked);
  }
  return checked;
}

function checkActorUncached(kind: EventKind, actor: unknown): Checked<string> {
  const shape = () => refusal("invalid_params", "actor must be {kind, id, display_name?, profile?, connection_id?}", { field: "actor" });
  if (actor === null || typeof actor !== "object" || Array.isArray(actor)) return no(shape());
  const record = actor as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (key === "kind" || key === "id") continue;
    if (!ACTOR_OPTIONAL_FIELDS.has(key)) return no(shape());
    const value = record[key];
    if (value === undefined) continue;
    if (typeof value !== "string" || value.length > MAX_NAME_CHARS) return no(shape());
  }
  if (typeof record.kind !== "string" || !ACTOR_KINDS.has(record.kind)) return no(shape());
  const idChecked = checkId(record.id, "actor.id");
  if (!idChecked.ok) return no(idChecked.refusal);
  const required = ACTOR_KIND_OF[kind];
  if (record.kind !== required) {
    return no(
      refusal("invalid_params", `${kind} events are written by a ${required} actor, not a ${record.kind}`, {
        field: "actor",
        kind,
        required_actor_kind: required,
      }),
    );
  }
  return canonicalObject(record satisfies Partial<Actor>, "actor", MAX_ACTOR_BYTES);
}

/**
 * Canonical payload JSON for an event kind. `message.user` is exactly `{text, thread_id?}`; room
 * kinds are checked for their fields; other server kinds only need to be a bounded JSON object.
 */
export function checkPayload(kind: EventKind, payload: unknown): Checked<string> {
  if (payload === null || typeof payload !== "object" || Array.isArray(payload)) {
    return no(refusal("invalid_params", "payload must be a JSON object", { field: "payload" }));
  }
  const record = payload as Record<string, unknown>;
  switch (kind) {
    case "message.user": {
      // A plain loop: a closure per send is garbage per send.
      for (const key in record) {
        if (key !== "text" && key !== "thread_id" && Object.hasOwn(record, key)) {
          return no(refusal("invalid_params", "a message payload is exactly {text, thread_id?}", { field: "payload" }));
        }
      }
      const text = checkText(record.text, "payload.text");
      if (!text.ok) return no(text.refusal);
      if (record.thread_id !== undefined) {
        const thread = checkId(record.thread_id, "payload.thread_id");
        if (!thread.ok) return no(thread.refusal);
      }
      // The exact canonical form of {text, thread_id?} ("text" sorts before "thread_id"), without the
      // generic walker: this is every client send. Bounded by the text limit, far below the payload one.
      const quoted = needsEscape(text.value) ? JSON.stringify(text.value) : `"${text.value}"`;
      const json =
        record.thread_id === undefined ? `{"text":${quoted}}` : `{"text":${quoted},"thread_id":${JSON.stringify(record.thread_id)}}`;
      // Escaping can grow a 64 KiB text past the payload limit (control characters take 6 bytes).
      if (json.length * 3 > MAX_PAYLOAD_BYTES && utf8Bytes(json) > MAX_PAYLOAD_BYTES)
        return canonicalObject(record, "payload", MAX_PAYLOAD_BYTES);
      return ok(json);
    }
    case "message.member": {
      const text = checkText(record.text, "payload.text");
      if (!text.ok) return no(text.refusal);
      break;
    }
    case "room.created": {
      const name = checkRoomName(record.name);
      if (!name.ok) return no(name.refusal);
      const members = checkMembers(record.members);
      if (!members.ok) return no(members.refusal);
      break;
    }
    case "room.renamed": {
      const name = checkRoomName(record.name);
      if (!name.ok) return no(name.refusal);
      break;
    }
    case "room.members_changed": {
      const members = checkMembers(record.members);
      if (!members.ok) return no(members.refusal);
      break;
    }
    default:
      break;
  }
  return canonicalObject(record, "payload", MAX_PAYLOAD_BYTES);
}

/**
 * The text of a payload whose JSON (as checkPayload returned it) is exactly `{"text":"<text>"}`:
 * a message without thread whose text needed no escape (the usual message); undefined otherwise.
 * checkPayload writes a message payload as `{"text":` + JSON.stringify(text) + `}`, and
 * JSON.stringify only makes a string longer when it escapes something, so a JSON of the unescaped
 * length holds the text as it is.
 */
export function unescapedMessageText(kind: EventKind, payload: Record<string, unknown>, payloadJson: string): string | undefined {
  if (kind !== "message.user" || payload.thread_id !== undefined) return undefined;
  const { text } = payload;
  return typeof text === "string" && payloadJson.length === text.length + 11 ? text : undefined;
}

/** `groups.send` params as a client sends them (validated at the adapter edge). */
export const sendParamsSchema = z
  .object({
    room_id: z.string(),
    event_id: z.string(),
    payload: z.object({ text: z.string(), thread_id: z.string().optional() }).strict(),
    expected_latest_seq: z.number().int().nonnegative().optional(),
  })
  .strict();
export type SendParams = z.infer<typeof sendParamsSchema>;

const SEND_KEYS = new Set(["room_id", "event_id", "payload", "expected_latest_seq"]);
const MESSAGE_PAYLOAD_KEYS = new Set(["text", "thread_id"]);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/**
 * The shape zod checks, tested by hand: true only for exactly what sendParamsSchema accepts, so a
 * well-formed send (every send of a pipelined stream) skips zod; anything else goes through zod
 * for its precise message.
 */
function hasSendShape(raw: unknown): raw is SendParams {
  if (!isPlainObject(raw) || typeof raw.room_id !== "string" || typeof raw.event_id !== "string") return false;
  for (const key of Object.keys(raw)) if (!SEND_KEYS.has(key)) return false;
  const payload = raw.payload;
  if (!isPlainObject(payload) || typeof payload.text !== "string") return false;
  for (const key of Object.keys(payload)) if (!MESSAGE_PAYLOAD_KEYS.has(key)) return false;
  if (payload.thread_id !== undefined && typeof payload.thread_id !== "string") return false;
  const expected = raw.expected_latest_seq;
  return expected === undefined || (typeof expected === "number" && Number.isSafeInteger(expected) && expected >= 0);
}

/** Parses raw `groups.send` params: shape by zod, ids and limits by the checks above. */
export function checkSendParams(raw: unknown): Checked<SendParams> {
  if (hasSendShape(raw)) return checkSendValues(raw);
  const parsed = sendParamsSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? issue.path.join(".") : "params";
    return no(
      refusal(
        "invalid_params",
        `${where}: ${issue?.message ?? "invalid"}; send {room_id, event_id, payload: {text, thread_id?}, expected_latest_seq?}`,
        {
          field: where,
        },
      ),
    );
  }
  return checkSendValues(parsed.data);
}

function checkSendValues(params: SendParams): Checked<SendParams> {
  const room = checkId(params.room_id, "room_id");
  if (!room.ok) return no(room.refusal);
  const event = checkClientEventId(params.event_id);
  if (!event.ok) return no(event.refusal);
  const payload = checkPayload("message.user", params.payload);
  if (!payload.ok) return no(payload.refusal);
  return ok(params);
}

export interface LogRead {
  since_seq: number;
  limit: number;
  max_bytes: number;
}

/**
 * `groups.log` bounds: since_seq ≥ 0, limit 1..500 (1..`maxLimit` for replication pages), max_bytes
 * 1 KiB..6 MiB (defaults applied by the caller).
 */
export function checkLogRead(read: LogRead, maxLimit: number = MAX_LOG_LIMIT): Checked<LogRead> {
  if (!Number.isSafeInteger(read.since_seq) || read.since_seq < 0) {
    return no(refusal("invalid_params", `since_seq must be an integer ≥ 0, got ${read.since_seq}`, { field: "since_seq" }));
  }
  if (!Number.isSafeInteger(read.limit) || read.limit < MIN_LOG_LIMIT || read.limit > maxLimit) {
    return no(
      refusal("invalid_params", `limit must be ${MIN_LOG_LIMIT}..${maxLimit}, got ${read.limit}`, {
        field: "limit",
        min: MIN_LOG_LIMIT,
        max: maxLimit,
      }),
    );
  }
  if (!Number.isSafeInteger(read.max_bytes) || read.max_bytes < MIN_PAGE_MAX_BYTES || read.max_bytes > MAX_PAGE_MAX_BYTES) {
    return no(
      refusal("invalid_params", `max_bytes must be an integer from ${MIN_PAGE_MAX_BYTES} to ${MAX_PAGE_MAX_BYTES}, got ${read.max_bytes}`, {
        field: "max_bytes",
        min: MIN_PAGE_MAX_BYTES,
        max: MAX_PAGE_MAX_BYTES,
      }),
    );
  }
  return ok(read);
}
