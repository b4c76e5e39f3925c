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

  it("is aborted by its owner with the owner's reason, and stops listening to its sources", () => {
    const a = new AbortController();
    const linked = new LinkedSignal([a.signal]);
    linked.abort("deleted");
    a.abort("late");
    linked.abort("again");
    expect(linked.signal.aborted).toBe(true);
    expect(linked.signal.reason).toBe("deleted");
  });

  it("once disposed, its sources no longer abort it", () => {
    const a = new AbortController();
    const linked = new LinkedSignal([a.signal]);
    linked.dispose();
    a.abort("late");
    expect(linked.signal.aborted).toBe(false);
  });
});
