import { HermesError } from "@hermes/common/pure";
import { describe, expect, it } from "vitest";
import {
  assertPeerInput,
  decideIdempotency,
  IDEMPOTENCY_KEY_MAX_CHARS,
  idempotencyScope,
  PEER_INPUT_LIMIT_CHARS,
  parseIdempotencyKey,
  parsePeerTarget,
  parseRunRequest,
  type RawRunRequest,
  runFingerprint,
} from "./run-request.js";

function refusal(fn: () => unknown): HermesError {
  try {
    fn();
  } catch (err) {
    if (err instanceof HermesError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

const RAW: RawRunRequest = {
  profile: "bob",
  input: "summarise ticket 123",
  sender_profile: "alice",
  sender_gateway: "gw-a",
  sender_name: "Alice",
  idempotency_key: "",
};

describe("idempotency keys", () => {
  it("empty means none; 1-255 characters are taken verbatim", () => {
    expect(parseIdempotencyKey(undefined)).toBeNull();
    expect(parseIdempotencyKey("")).toBeNull();
    expect(parseIdempotencyKey("ticket-123")).toBe("ticket-123");
    expect(parseIdempotencyKey(" spaced key ")).toBe(" spaced key ");
    expect(parseIdempotencyKey("k".repeat(IDEMPOTENCY_KEY_MAX_CHARS))).toHaveLength(255);
    // Counted in characters: 255 emoji are fine.
    expect(parseIdempotencyKey("🔑".repeat(255))).toBeTruthy();
  });

  it("refuses 256 characters and CR, LF or NUL", () => {
    expect(refusal(() => parseIdempotencyKey("k".repeat(256)))).toMatchObject({
      reason: "invalid_params",
      data: { limit: 255, length: 256 },
    });
    for (const bad of ["a\rb", "a\nb", "a\0b", "\n"]) {
      expect(refusal(() => parseIdempotencyKey(bad)).message).toContain("CR, LF or NUL");
    }
  });
});

describe("peer input", () => {
  it("is taken verbatim: quotes, $(...) and backticks are data", () => {
    const text = "run `rm -rf /` and $(whoami) \"quoted\" 'single'\n";
    expect(assertPeerInput(text)).toBe(text);
  });

  it("refuses blank, non-text and oversized input", () => {
    expect(refusal(() => assertPeerInput("  \n\t")).reason).toBe("invalid_params");
    expect(refusal(() => assertPeerInput(undefined)).reason).toBe("invalid_params");
    expect(refusal(() => assertPeerInput("x".repeat(PEER_INPUT_LIMIT_CHARS + 1)))).toMatchObject({
      reason: "payload_too_large",
      data: { limit: PEER_INPUT_LIMIT_CHARS, length: PEER_INPUT_LIMIT_CHARS + 1 },
    });
    expect(assertPeerInput("x".repeat(PEER_INPUT_LIMIT_CHARS))).toHaveLength(PEER_INPUT_LIMIT_CHARS);
  });
});

describe("run requests", () => {
  it("parses a full request; an empty profile is default", () => {
    expect(parseRunRequest(RAW)).toEqual({ ...RAW, idempotency_key: null });
    expect(parseRunRequest({ ...RAW, profile: "", idempotency_key: "k1" })).toMatchObject({ profile: "default", idempotency_key: "k1" });
  });

  it("refuses bad names with the rule, and a missing sender", () => {
    expect(refusal(() => parseRunRequest({ ...RAW, profile: "../etc" }))).toMatchObject({ reason: "invalid_name" });
    expect(refusal(() => parseRunRequest({ ...RAW, profile: "Bob" })).message).toContain("^[a-z0-9][a-z0-9_-]{0,63}$");
    expect(refusal(() => parseRunRequest({ ...RAW, sender_profile: "" })).message).toContain("sender_profile is required");
    expect(refusal(() => parseRunRequest({ ...RAW, sender_profile: "A B" })).reason).toBe("invalid_name");
    expect(refusal(() => parseRunRequest({ ...RAW, sender_gateway: "" })).reason).toBe("invalid_params");
    expect(refusal(() => parseRunRequest({ ...RAW, sender_gateway: "gw/../x" })).reason).toBe("invalid_params");
    expect(refusal(() => parseRunRequest({ ...RAW, sender_name: "n".repeat(201) })).reason).toBe("invalid_params");
    expect(refusal(() => parseRunRequest({ ...RAW, input: "" })).reason).toBe("invalid_params");
    expect(refusal(() => parseRunRequest({ ...RAW, idempotency_key: "a\nb" })).reason).toBe("invalid_params");
    for (const garbage of [null, 42, "text", [], { ...RAW, input: 7 }, { profile: "bob" }]) {
      expect(refusal(() => parseRunRequest(garbage)).reason).toBe("invalid_params");
    }
  });
});

describe("idempotency decisions", () => {
  const f1 = runFingerprint("bob", "task one");

  it("fingerprints the resolved profile and the message only", () => {
    expect(runFingerprint("bob", "task one")).toBe(f1);
    expect(runFingerprint("bob", "task one ")).not.toBe(f1);
    expect(runFingerprint("robert", "task one")).not.toBe(f1);
    // No ambiguity from joining: ["a/b","c"] and ["a","b/c"] differ.
    expect(runFingerprint("a", "b\u0000c")).not.toBe(runFingerprint("a\u0000b", "c"));
  });

  it("create for an unseen key, replay for the same input, conflict for another", () => {
    expect(decideIdempotency(undefined, f1, "k")).toEqual({ kind: "create" });
    expect(decideIdempotency({ run_id: "run_1", fingerprint: f1 }, f1, "k")).toEqual({ kind: "replay", run_id: "run_1" });
    const conflict = refusal(() => decideIdempotency({ run_id: "run_1", fingerprint: f1 }, runFingerprint("bob", "task two"), "k"));
    expect(conflict).toMatchObject({ reason: "idempotency_conflict", data: { idempotency_key: "k", run_id: "run_1" } });
    expect(conflict.exitCode).toBe(2);
  });

  it("scopes keys by sender", () => {
    expect(idempotencyScope({ sender_profile: "alice", sender_gateway: "gw-a" })).toBe("alice@gw-a");
  });
});

describe("peer targets", () => {
  it("parses <peer> and <peer>/<profile>", () => {
    expect(parsePeerTarget("spark")).toEqual({ peer: "spark", profile: "default" });
    expect(parsePeerTarget("spark/researcher")).toEqual({ peer: "spark", profile: "researcher" });
    expect(parsePeerTarget("my-vps_2/bob")).toEqual({ peer: "my-vps_2", profile: "bob" });
  });

  it("refuses bad peer or profile names (usage errors, exit 2)", () => {
    for (const bad of ["", "Spark", "-x", "spark/", "spark/Bob", "spark/a/b", "/bob", "x".repeat(65)]) {
      const e = refusal(() => parsePeerTarget(bad));
      expect(e.exitCode, bad).toBe(2);
    }
  });
});
