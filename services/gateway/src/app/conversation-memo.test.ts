import { describe, expect, it } from "vitest";
import { ConversationMemo } from "./conversation-memo.js";

const said = (text: string) => ({ seq: 1, messages: [{ role: "user" as const, content: text }] });

describe("ConversationMemo", () => {
  it("forgets the least recently used session first; a read counts as a use", () => {
    const memo = new ConversationMemo(2);
    memo.set("a", said("a"));
    memo.set("b", said("b"));
    expect(memo.get("a")?.messages[0]?.content).toBe("a");
    memo.set("c", said("c"));
    expect(memo.size).toBe(2);
    expect(memo.get("b")).toBeUndefined();
    expect(memo.get("a")?.messages[0]?.content).toBe("a");
    expect(memo.get("c")?.messages[0]?.content).toBe("c");
  });

  it("replaces a session's conversation, and forgets it on request", () => {
    const memo = new ConversationMemo(4);
    memo.set("a", said("one"));
    memo.set("a", { seq: 3, messages: [] });
    expect(memo.get("a")).toEqual({ seq: 3, messages: [] });
    expect(memo.size).toBe(1);
    memo.forget("a");
    expect(memo.get("a")).toBeUndefined();
  });
});
