import { describe, expect, it } from "vitest";
import { assertDeliveryMessage, idempotencyPayload, ttlDeadline, ttlExpired } from "./delivery.js";
import { type DeliveryEnvelope, deliveryEnvelopeSchema, parseEnvelope } from "./envelope.js";
import { HermesError } from "./errors.js";
import { DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS, MESSAGE_LIMIT_CHARS, messageLength } from "./limits.js";

/** A HermesError with these fields (the matcher `toThrow` compares against). */
const refusal = (fields: { reason: string; message?: unknown; data?: unknown }) => expect.objectContaining(fields);

/** A string that starts with `text`. */
const startingWith = (text: string) => expect.stringMatching(new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`));

function envelope(overrides: Partial<DeliveryEnvelope> = {}): DeliveryEnvelope {
  return {
    delivery_id: "dlv_0001",
    from_profile: "alice",
    from_gateway: "laptop",
    target: "bob",
    message: "hello",
    created_at: "2025-01-02T03:04:05.000Z",
    ttl_seconds: DEFAULT_TTL_SECONDS,
    ...overrides,
  };
}

describe("limits", () => {
  it("are the documented ones", () => {
    expect(MESSAGE_LIMIT_CHARS).toBe(16_000);
    expect(DEFAULT_TTL_SECONDS).toBe(900);
    expect(MAX_TTL_SECONDS).toBe(604_800);
  });
});

describe("the message rule (assertDeliveryMessage)", () => {
  it("accepts exactly 16,000 characters, counting emoji as one", () => {
    expect(assertDeliveryMessage("x".repeat(16_000))).toHaveLength(16_000);
    const emoji = "🤖".repeat(16_000);
    expect(emoji.length).toBe(32_000);
    expect(messageLength(emoji)).toBe(16_000);
    expect(assertDeliveryMessage(emoji)).toBe(emoji);
    expect(() => assertDeliveryMessage(`${emoji}a`)).toThrow(refusal({ reason: "payload_too_large" }));
  });

  it("refuses empty, blank and non-text messages", () => {
    for (const bad of ["", "   \n\t", null, 42, undefined]) {
      expect(() => assertDeliveryMessage(bad)).toThrow(refusal({ reason: "invalid_params" }));
    }
  });

  // input, field, then the refusal: reason, text it starts with, data (undefined: accepted as is).
  const table: [string, unknown, string | undefined, { reason: string; text: string; data: Record<string, unknown> } | undefined][] = [
    ["one character", "a", undefined, undefined],
    ["shell-looking text, kept verbatim", "  $(rm -rf ~) `id` \"q\" 'q'  \n", undefined, undefined],
    ["the limit in code points", "é".repeat(16_000), undefined, undefined],
    ["not text", 42, undefined, { reason: "invalid_params", text: "message must be text, got number", data: { field: "message" } }],
    ["null", null, undefined, { reason: "invalid_params", text: "message must be text, got null", data: { field: "message" } }],
    ["empty", "", undefined, { reason: "invalid_params", text: "message is empty: write what", data: { field: "message" } }],
    ["blank", " \n\t ", undefined, { reason: "invalid_params", text: "message is empty", data: { field: "message" } }],
    [
      "one over the limit",
      "x".repeat(16_001),
      undefined,
      { reason: "payload_too_large", text: "message is 16,001 characters; the limit is 16,000.", data: { limit: 16_000, length: 16_001 } },
    ],
    [
      "blank, named where it sits in a frame",
      "",
      "envelope.message",
      { reason: "invalid_params", text: "message is empty", data: { field: "envelope.message" } },
    ],
  ];
  it.each(table)("%s", (_name, message, field, refused) => {
    if (refused === undefined) {
      expect(assertDeliveryMessage(message, field)).toBe(message);
      return;
    }
    const { reason, text, data } = refused;
    expect(() => assertDeliveryMessage(message, field)).toThrow(refusal({ reason, message: startingWith(text), data }));
  });
});

describe("parseEnvelope", () => {
  it("round-trips a valid envelope through JSON", () => {
    const e = envelope();
    expect(parseEnvelope(JSON.parse(JSON.stringify(e)))).toEqual(e);
  });

  it("names the bad field and never throws anything but a HermesError", () => {
    expect(() => parseEnvelope({ ...envelope(), created_at: "yesterday" })).toThrow(
      refusal({ reason: "invalid_params", message: expect.stringContaining("created_at") }),
    );
    for (const junk of [null, 5, "x", [], { ...envelope(), extra: 1 }, { ...envelope(), message: 7 }]) {
      expect(() => parseEnvelope(junk)).toThrow(HermesError);
      expect(() => parseEnvelope(junk)).toThrow(refusal({ reason: "invalid_params" }));
    }
    expect(() => parseEnvelope({ ...envelope(), message: "y".repeat(20_000) })).toThrow(refusal({ reason: "payload_too_large" }));
  });

  const frame = { frame: "send frame", field: "envelope" };
  // value, the frame it sits in, then the field the refusal names and the text it starts with.
  const table: [string, unknown, typeof frame | undefined, string, string][] = [
    ["not an object", 5, undefined, "envelope", "invalid delivery envelope: envelope: "],
    ["nothing, inside a frame", undefined, frame, "envelope", "invalid send frame: envelope: "],
    [
      "a path in the id",
      envelope({ delivery_id: "../x" }),
      undefined,
      "delivery_id",
      "invalid delivery envelope: delivery_id: an id matching",
    ],
    ["a TTL of zero", envelope({ ttl_seconds: 0 }), frame, "envelope.ttl_seconds", "invalid send frame: envelope.ttl_seconds: "],
    [
      "a TTL over a week",
      envelope({ ttl_seconds: MAX_TTL_SECONDS + 1 }),
      undefined,
      "ttl_seconds",
      "invalid delivery envelope: ttl_seconds",
    ],
    ["a fractional TTL", envelope({ ttl_seconds: 1.5 }), undefined, "ttl_seconds", "invalid delivery envelope: ttl_seconds"],
    [
      "a time without an offset",
      envelope({ created_at: "2025-01-02T03:04:05" }),
      undefined,
      "created_at",
      "invalid delivery envelope: created_at",
    ],
    ["an empty target", envelope({ target: "" }), undefined, "target", "invalid delivery envelope: target"],
    ["an unknown field", { ...envelope(), urgent: true }, undefined, "envelope", "invalid delivery envelope: envelope: "],
    ["a blank message, inside a frame", envelope({ message: "   " }), frame, "envelope.message", "message is empty"],
  ];
  it.each(table)("refuses %s, naming the field", (_name, value, within, field, text) => {
    expect(() => parseEnvelope(value, within)).toThrow(refusal({ reason: "invalid_params", message: startingWith(text), data: { field } }));
  });

  it("accepts the largest TTL and an offset time, and is the schema plus the message rule", () => {
    const e = envelope({ ttl_seconds: MAX_TTL_SECONDS, created_at: "2025-01-02T05:04:05+02:00" });
    expect(parseEnvelope(e)).toEqual(e);
    // The schema alone takes a blank message; the parse never does.
    expect(deliveryEnvelopeSchema.safeParse(envelope({ message: " " })).success).toBe(true);
    expect(() => parseEnvelope(envelope({ message: " " }))).toThrow(refusal({ reason: "invalid_params" }));
  });
});

describe("idempotencyPayload", () => {
  it("is sender, target and message, with field boundaries kept; not time or TTL", () => {
    const a = envelope();
    expect(idempotencyPayload(a)).toBe('["alice","laptop","bob","hello"]');
    expect(idempotencyPayload({ ...a, created_at: "2031-01-01T00:00:00Z", ttl_seconds: 5 } as DeliveryEnvelope)).toBe(
      idempotencyPayload(a),
    );
    expect(idempotencyPayload(envelope({ from_profile: "ab", from_gateway: "c" }))).not.toBe(
      idempotencyPayload(envelope({ from_profile: "a", from_gateway: "bc" })),
    );
  });
});

describe("the TTL rule (ttlDeadline, ttlExpired)", () => {
  const T0 = Date.parse("2030-01-01T00:00:00.000Z");
  const at = (ms: number) => new Date(T0 + ms).toISOString();

  // created_at, ttl, accepted at (the receiver's clock, if any), then the deadline.
  const deadlines: [string, string, number, number | undefined, number][] = [
    ["created + ttl", at(0), 60, undefined, T0 + 60_000],
    ["accepted later than created: still from created", at(0), 60, T0 + 5_000, T0 + 60_000],
    ["a sender's clock an hour ahead counts from acceptance", at(3_600_000), 60, T0, T0 + 60_000],
    ["ahead without an acceptance time: as sent", at(3_600_000), 60, undefined, T0 + 3_660_000],
  ];
  it.each(deadlines)("deadline: %s", (_name, created_at, ttl_seconds, acceptedAt, deadline) => {
    expect(ttlDeadline({ created_at, ttl_seconds }, acceptedAt)).toBe(deadline);
  });

  // now relative to the deadline, then expired?
  const expiry: [string, number, boolean][] = [
    ["long before", -60_000, false],
    ["one millisecond before", -1, false],
    ["at the deadline", 0, true],
    ["one millisecond after", 1, true],
    ["long after", 86_400_000, true],
  ];
  it.each(expiry)("expiry: %s", (_name, offset, expired) => {
    const deadline = ttlDeadline({ created_at: at(0), ttl_seconds: 900 });
    expect(ttlExpired(deadline, deadline + offset)).toBe(expired);
  });
});
