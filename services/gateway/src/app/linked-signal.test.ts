import { describe, expect, it } from "vitest";
import { LinkedSignal } from "./linked-signal.js";

describe("LinkedSignal", () => {
  it("aborts with the reason of the first source that aborts", () => {
    const a = new AbortController();
    const b = new AbortController();
    const linked = new LinkedSignal([a.signal, undefined, b.signal]);
    expect(linked.signal.aborted).toBe(false);
    b.abort(new Error("b went"));
    a.abort(new Error("a went"));
    expect(linked.signal.reason).toEqual(new Error("b went"));
  });

  it("starts aborted when a source already is", () => {
    const a = new AbortController();
    a.abort("early");
    const linked = new LinkedSignal([new AbortController().signal, a.signal]);
    expect(linked.signal.aborted).toBe(true);
    expect(linked.signal.reason).toBe("early");
  });

  it("once disposed, its sources no longer abort it", () => {
    const a = new AbortController();
    const linked = new LinkedSignal([a.signal]);
    linked.dispose();
    a.abort("late");
    expect(linked.signal.aborted).toBe(false);
  });
});
