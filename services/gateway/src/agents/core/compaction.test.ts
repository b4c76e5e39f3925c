import { describe, expect, it } from "vitest";
import { type CompactableMessage, compactTranscript } from "./compaction.js";

const AT = "2025-06-01T12:00:00.000Z";
const m = (role: CompactableMessage["role"], content: string): CompactableMessage => ({ role, content, meta: {}, created_at: AT });

function turns(n: number): CompactableMessage[] {
  return Array.from({ length: n }, (_, i) => [m("user", `q${i}`), m("assistant", `a${i}`)]).flat();
}

describe("compactTranscript", () => {
  it("keeps the newest quarter behind a note that counts what was removed", () => {
    const result = compactTranscript(turns(8), AT)!;
    expect(result.removed).toBe(12);
    expect(result.messages.map((x) => x.content)).toEqual([expect.stringContaining("12 earlier messages"), "q6", "a6", "q7", "a7"]);
    expect(result.messages[0]).toMatchObject({ role: "notification", meta: { compaction: { removed: 12 } } });
  });

  it("keeps at least min_keep messages", () => {
    const result = compactTranscript(turns(3), AT, { keep_fraction: 0.1, min_keep: 2 })!;
    expect(result.messages.slice(1).map((x) => x.content)).toEqual(["q2", "a2"]);
  });

  it("never starts the kept tail with a tool result or an assistant message", () => {
    const history = [
      m("user", "q0"),
      m("assistant", "calls a tool"),
      m("tool", "result"),
      m("assistant", "a0"),
      m("notification", "Delivery to bob failed [reason: unknown]: x"),
      m("user", "q1"),
      m("assistant", "calls"),
      m("tool", "r1"),
      m("assistant", "a1"),
    ];
    const result = compactTranscript(history, AT, { keep_fraction: 0.4, min_keep: 2 })!;
    expect(result.messages[1]).toMatchObject({ role: "user", content: "q1" });
    expect(result.removed).toBe(5);
  });

  it("returns undefined when nothing can be removed", () => {
    expect(compactTranscript([], AT)).toBeUndefined();
    expect(compactTranscript(turns(1), AT)).toBeUndefined();
    // A tail that would have to start mid-turn with no later turn start keeps the whole thing.
    expect(
      compactTranscript([m("user", "q"), m("assistant", "a"), m("tool", "t"), m("assistant", "b")], AT, {
        keep_fraction: 0.5,
        min_keep: 1,
      }),
    ).toMatchObject({ removed: 4, messages: [expect.objectContaining({ role: "notification" })] });
  });

  it("refuses a nonsensical fraction", () => {
    expect(() => compactTranscript(turns(4), AT, { keep_fraction: 1, min_keep: 1 })).toThrow(RangeError);
  });
});
