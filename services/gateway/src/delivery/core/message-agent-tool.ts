import { HermesError } from "@hermes/common/pure";
import { assertDeliveryMessage, MESSAGE_LIMIT_CHARS } from "@hermes/contract";
import type { ToolSpec } from "../../agents/core/provider.js";
import { TARGET_FORMS } from "./targets.js";

export const MESSAGE_AGENT_TOOL_NAME = "message_agent";

/** Offered only in a profile's canonical Bot Chat session. */
export const MESSAGE_AGENT_TOOL: ToolSpec = {
  name: MESSAGE_AGENT_TOOL_NAME,
  description:
    'Send a message to a teammate bot. Delivery is fire-and-forget: you get {status: "queued", delivery_id} at once and the reply ' +
    `arrives later in this chat. Target forms: ${TARGET_FORMS.join(", ")}. Write your own message; do not forward the user's words verbatim.`,
  parameters: {
    type: "object",
    properties: {
      target: { type: "string", description: `The teammate: ${TARGET_FORMS.join(", ")}` },
      message: { type: "string", maxLength: MESSAGE_LIMIT_CHARS, description: `What to say (at most ${MESSAGE_LIMIT_CHARS} characters).` },
    },
    required: ["target", "message"],
    additionalProperties: false,
  },
};

export interface MessageAgentArgs {
  target: string;
  message: string;
}

/** Validates the JSON arguments a model wrote for `message_agent`. The message stays verbatim. */
export function parseMessageAgentArgs(json: string): MessageAgentArgs {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw new HermesError("invalid_params", 'message_agent arguments are not valid JSON; send {"target": "…", "message": "…"}');
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new HermesError("invalid_params", 'message_agent arguments must be an object {"target": "…", "message": "…"}');
  }
  const { target, message, ...rest } = value as Record<string, unknown>;
  const extra = Object.keys(rest);
  if (extra.length > 0) throw new HermesError("invalid_params", `message_agent takes only target and message, not ${extra.join(", ")}`);
  if (typeof target !== "string" || target.trim().length === 0) {
    throw new HermesError("invalid_params", `message_agent needs a target (${TARGET_FORMS.join(", ")})`);
  }
  return { target, message: assertDeliveryMessage(message) };
}
