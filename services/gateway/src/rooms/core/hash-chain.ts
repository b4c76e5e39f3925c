import { hash } from "node:crypto";
import { canonicalJson } from "./canonical-json.js";
import { copyBytes, SAFE_INTEGER_MAX_BYTES, textBuffer, writeSafeInteger, writeShortText } from "./text-buffer.js";
import { EVENT_KINDS, type RoomEvent } from "./types.js";

/** The "previous hash" of seq 1. */
export const GENESIS_HASH = "";

/** The fields the hash covers. `created_at` is deliberately left out: it is the appender's clock, not content. */
export interface HashedFields {
  seq: number;
  event_id: string;
  kind: string;
  actor_json: string;
  epoch: number;
  payload_json: string;
}

/**
 * `sha256hex(prev_hash ‖ canonical([seq, event_id, kind, actor, epoch, payload]))` (docs/PROTOCOL.md "Hash chain").
 * actor and payload are re-canonicalised from their JSON text, so a peer that stored the same values
 * with different whitespace or key order still computes the same hash. This is the definition.
 */
export function eventHash(prevHash: string, fields: HashedFields): string {
  return hash(
    "sha256",
    hashInput(prevHash, fields, canonicalJson(JSON.parse(fields.actor_json)), canonicalJson(JSON.parse(fields.payload_json))),
    "hex",
  );
}

/**
 * The same hash for fields whose actor_json and payload_json are already canonical (everything the
 * core writes is): it skips re-parsing, which is most of the cost of an append.
 */
export function eventHashOfCanonical(prevHash: string, fields: HashedFields): string {
  // One-shot hash (Node ≥ 20.12): half the cost of createHash().update().digest(), and this runs
  // for every event appended or verified.
  return hash("sha256", hashInput(prevHash, fields, fields.actor_json, fields.payload_json), "hex");
}

/**
 * eventHashOfCanonical for the events a group commit appends, one after another, without building
 * the hash input as a string: its pieces are written into one buffer kept from event to event,
 * and a message's text (`plainText`: the payload JSON is exactly `{"text":"<plainText>"}`) is
 * copied as it is. Same hash, less garbage: the input string was most of an append's allocation.
 * For events as the core plans them: seq and epoch are safe integers, and the event id passed
 * checkId (nothing in it to escape).
 */
export class ChainHasher {
  private buffer = textBuffer(4096);
  /** `",` + kind quoted + `,` + actor_json + `,` + epoch + `,` as UTF-8: what follows the event id, for the last kind, actor_json and epoch. */
  private kind: string | undefined;
  private actorJson: string | undefined;
  private epoch: number | undefined;
  private middle: Uint8Array = new Uint8Array(0);

  hash(prevHash: string, fields: HashedFields, plainText?: string): string {
    if (fields.kind !== this.kind || fields.actor_json !== this.actorJson || fields.epoch !== this.epoch) {
      this.kind = fields.kind;
      this.actorJson = fields.actor_json;
      this.epoch = fields.epoch;
      this.middle = Buffer.from(`",${JSON.stringify(fields.kind)},${fields.actor_json},${JSON.stringify(fields.epoch)},`, "utf8");
    }
    const payloadUnits = plainText === undefined ? fields.payload_json.length : plainText.length;
    // UTF-8 takes at most 3 bytes per UTF-16 unit.
    const bound =
      3 * (prevHash.length + fields.event_id.length + payloadUnits) +
      this.middle.length +
      MESSAGE_HEAD.length +
      MESSAGE_TAIL.length +
      SAFE_INTEGER_MAX_BYTES +
      8;
    if (bound > this.buffer.length) this.buffer = textBuffer(Math.max(bound, this.buffer.length * 2));
    const buffer = this.buffer;
    // The pieces that repeat from event to event are copied as bytes (a copy costs a third of a
    // call into Node's string writer); the previous hash and the text are written by that writer.
    let at = buffer.utf8Write(prevHash, 0);
    buffer[at++] = 0x5b; // [
    at = writeSafeInteger(buffer, at, fields.seq);
    buffer[at++] = 0x2c; // ,
    buffer[at++] = 0x22; // "
    at = writeShortText(buffer, at, fields.event_id);
    at = copyBytes(buffer, at, this.middle);
    if (plainText === undefined) at += buffer.utf8Write(fields.payload_json, at);
    else {
      at = copyBytes(buffer, at, MESSAGE_HEAD);
      at += buffer.utf8Write(plainText, at);
      at = copyBytes(buffer, at, MESSAGE_TAIL);
    }
    buffer[at++] = 0x5d; // ]
    return hash("sha256", new Uint8Array(buffer.buffer, buffer.byteOffset, at), "hex");
  }
}

/** How a message payload `{"text":"…"}` starts and ends around its plain text. */
const MESSAGE_HEAD = Buffer.from('{"text":"', "latin1");
const MESSAGE_TAIL = Buffer.from('"}', "latin1");

/** Every event kind as a JSON string, written once. */
const QUOTED_KINDS: ReadonlyMap<string, string> = new Map(EVENT_KINDS.map((kind) => [kind, JSON.stringify(kind)]));

/** `prev_hash ‖ canonical 6-tuple`, the hash's input. */
function hashInput(prevHash: string, fields: HashedFields, actorCanonical: string, payloadCanonical: string): string {
  // canonicalJson of the 6-tuple, written out: numbers and strings as JSON.stringify writes them.
  const kind = QUOTED_KINDS.get(fields.kind) ?? JSON.stringify(fields.kind);
  return `${prevHash}[${jsonInteger(fields.seq)},${JSON.stringify(fields.event_id)},${kind},${actorCanonical},${jsonInteger(fields.epoch)},${payloadCanonical}]`;
}

/**
 * A number as JSON.stringify writes it. A safe integer (every seq and epoch) is written as its
 * decimal digits either way; the template skips JSON.stringify's call, which runs twice per event
 * hashed.
 */
function jsonInteger(value: number): string {
  return Number.isSafeInteger(value) ? `${value}` : JSON.stringify(value);
}

/** Does `event.hash` chain from `prevHash`? False (never a throw) for unparsable JSON. */
export function hashChains(prevHash: string, event: RoomEvent): boolean {
  if (eventHashOfCanonical(prevHash, event) === event.hash) return true;
  try {
    return eventHash(prevHash, event) === event.hash;
  } catch {
    return false;
  }
}

export type ChainCheck = { ok: true; last_hash: string } | { ok: false; seq: number; problem: "gap" | "hash_mismatch"; detail: string };

/**
 * Verifies that `events` are dense from `prevSeq + 1` and that each hash chains from the one before,
 * starting at `prevHash` (GENESIS_HASH when prevSeq is 0). Returns the first problem found.
 */
export function verifyChain(events: readonly RoomEvent[], prevSeq: number, prevHash: string): ChainCheck {
  let expectedSeq = prevSeq + 1;
  let hash = prevHash;
  for (const event of events) {
    if (event.seq !== expectedSeq) {
      return { ok: false, seq: event.seq, problem: "gap", detail: `expected seq ${expectedSeq}, found ${event.seq}` };
    }
    if (!hashChains(hash, event)) {
      return { ok: false, seq: event.seq, problem: "hash_mismatch", detail: `event ${event.event_id} at seq ${event.seq} does not chain` };
    }
    hash = event.hash;
    expectedSeq++;
  }
  return { ok: true, last_hash: hash };
}
