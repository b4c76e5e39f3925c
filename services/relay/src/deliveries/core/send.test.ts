import { MAX_ENVELOPE_BYTES, MESSAGE_LIMIT_CHARS } from "@hermes/contract";
import { describe, expect, it } from "vitest";
import { payloadFingerprint } from "./deliveries.js";
import { parseSend } from "./send.js";

const valid = {
  envelope: {
    delivery_id: "dlv_1",
    from_profile: "alice",
    from_gateway: "gw-a",
    target: "bob@b",
    message: "hello",
    created_at: "2030-01-01T00:00:00.000Z",
    ttl_seconds: 900,
  },
  target_connection: "b",
  target_handle: "bob",
  sender_name: "Alice",
};

describe("parseSend", () => {
  it("accepts a well-formed send frame", () => {
    expect(parseSend(valid, 200)).toEqual(valid);
  });

  it("refuses bad fields with invalid_params naming the field", () => {
    const cases: [unknown, string][] = [
      [{ ...valid, target_connection: "B/x" }, "target_connection"],
      [{ ...valid, target_handle: "" }, "target_handle"],
      [{ ...valid, envelope: { ...valid.envelope, delivery_id: "../x" } }, "envelope.delivery_id"],
      [{ ...valid, envelope: { ...valid.envelope, ttl_seconds: 0 } }, "envelope.ttl_seconds"],
      [{ ...valid, envelope: { ...valid.envelope, created_at: "yesterday" } }, "envelope.created_at"],
      [{ ...valid, envelope: undefined }, "envelope"],
      [{ ...valid, envelope: { ...valid.envelope, message: "   " } }, "envelope.message"],
    ];
    for (const [frame, field] of cases) {
      expect(() => parseSend(frame, 100)).toThrow(
        expect.objectContaining({ reason: "invalid_params", data: expect.objectContaining({ field }) }),
      );
    }
  });

  it("refuses over-long messages and oversized envelopes with payload_too_large", () => {
    const long = { ...valid, envelope: { ...valid.envelope, message: "😀".repeat(MESSAGE_LIMIT_CHARS + 1) } };
    expect(() => parseSend(long, 70_000)).toThrow(expect.objectContaining({ reason: "payload_too_large" }));
    const exact = { ...valid, envelope: { ...valid.envelope, message: "😀".repeat(MESSAGE_LIMIT_CHARS) } };
    expect(parseSend(exact, 70_000).envelope.message).toHaveLength(MESSAGE_LIMIT_CHARS * 2);
    expect(() => parseSend(valid, MAX_ENVELOPE_BYTES + 1)).toThrow(expect.objectContaining({ reason: "payload_too_large" }));
  });
});

describe("payloadFingerprint", () => {
  it("covers sender, target and message, not time or TTL (the gateways' definition)", () => {
    const a = payloadFingerprint(valid.envelope);
    expect(payloadFingerprint({ ...valid.envelope, message: "hello!" })).not.toBe(a);
    expect(payloadFingerprint({ ...valid.envelope, target: "bea@b" })).not.toBe(a);
    expect(payloadFingerprint({ ...valid.envelope, from_gateway: "gw-x" })).not.toBe(a);
    expect(payloadFingerprint({ ...valid.envelope, created_at: "2031-01-01T00:00:00Z", ttl_seconds: 5 } as typeof valid.envelope)).toBe(a);
  });
});
