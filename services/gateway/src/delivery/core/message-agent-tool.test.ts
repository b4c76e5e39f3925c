import { HermesError } from "@hermes/common/pure";
import { describe, expect, it } from "vitest";
import { MESSAGE_AGENT_TOOL, parseMessageAgentArgs } from "./message-agent-tool.js";

function reasonOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof HermesError) return err.reason;
    throw err;
  }
  return "no error";
}

describe("message_agent tool", () => {
  it("declares target and message with the 16,000 limit", () => {
    expect(MESSAGE_AGENT_TOOL.name).toBe("message_agent");
    expect(MESSAGE_AGENT_TOOL.parameters).toMatchObject({
      required: ["target", "message"],
      properties: { message: { maxLength: 16_000 } },
    });
  });

  it("parses arguments and keeps the message verbatim", () => {
    const message = "  $(rm -rf ~) `id` \"q\" 'q'  \n";
    expect(parseMessageAgentArgs(JSON.stringify({ target: "bob", message }))).toEqual({ target: "bob", message });
  });

  it.each([
    ["not json", "invalid_params"],
    ["[]", "invalid_params"],
    ["null", "invalid_params"],
    ['{"target":"bob"}', "invalid_params"],
    ['{"message":"hi"}', "invalid_params"],
    ['{"target":"  ","message":"hi"}', "invalid_params"],
    ['{"target":"bob","message":"hi","urgent":true}', "invalid_params"],
    [JSON.stringify({ target: "bob", message: "x".repeat(16_001) }), "payload_too_large"],
  ])("refuses %s", (json, reason) => {
    expect(reasonOf(() => parseMessageAgentArgs(json))).toBe(reason);
  });
});
