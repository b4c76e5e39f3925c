import { HermesError } from "@hermes/common/pure";
import type { DeliveryReason } from "@hermes/contract";

/** A tool call as the model asked for it. `arguments` is the JSON text the model wrote, validated by the tool. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

/**
 * One message of a transcript. There is no system role on purpose: the system prompt (persona,
 * roster, ephemeral channel prompt) travels beside the history in `TurnRequest.system_prompt`, so
 * it can never be stored into a transcript by accident.
 */
export type ChatMessage =
  | { role: "user"; content: string /** Author handle in rooms ("user" for the human). */; name?: string | undefined }
  | { role: "assistant"; content: string; tool_calls?: ToolCall[] | undefined; name?: string | undefined }
  | { role: "tool"; tool_call_id: string; name?: string | undefined; content: string };

export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: Record<string, unknown>;
}

export interface TurnRequest {
  model: string;
  system_prompt: string;
  messages: readonly ChatMessage[];
  tools?: readonly ToolSpec[] | undefined;
  /**
   * "room" for a group-room member turn (the bot may pass), "direct" otherwise. Only providers that
   * can use it do (the local one); remote models read it from the prompt.
   */
  turn_kind?: "direct" | "room" | undefined;
  /** Aborted by the caller to cancel the turn. */
  signal?: AbortSignal | undefined;
}

export type TurnResult = { kind: "text"; text: string } | { kind: "tool_calls"; tool_calls: ToolCall[]; text?: string | undefined };

/** One turn = messages (+ tools) in, text or tool calls out; failures reject with ProviderError. */
export interface Provider {
  /** The key this provider has in config (`openai`, `local`, …). */
  readonly name: string;
  complete(request: TurnRequest): Promise<TurnResult>;
}

export interface ProviderErrorDetails {
  provider: string;
  http_status?: number | undefined;
  /** The raw response body (truncated), kept for diagnosis. */
  raw?: string | undefined;
  /** The caller aborted the turn: its outcome is the caller's to judge, and no fallback is tried. */
  cancelled?: boolean | undefined;
  cause?: unknown;
}

/** Keeps stored raw bodies bounded: enough to diagnose, never a megabyte of HTML. */
export const RAW_BODY_LIMIT = 4096;

/**
 * A failed turn with its delivery reason as a field and the provider's own text as the message, so the
 * completion notification can say `[reason: provider_quota_limit]: You exceeded your current quota…`.
 */
export class ProviderError extends HermesError {
  declare readonly reason: DeliveryReason;
  readonly provider: string;
  readonly http_status: number | undefined;
  readonly raw: string | undefined;
  readonly cancelled: boolean;

  constructor(reason: DeliveryReason, message: string, details: ProviderErrorDetails) {
    const raw = details.raw === undefined ? undefined : details.raw.slice(0, RAW_BODY_LIMIT);
    super(reason, message, {
      data: {
        provider: details.provider,
        ...(details.http_status !== undefined ? { http_status: details.http_status } : {}),
        ...(details.cancelled ? { cancelled: true } : {}),
      },
      cause: details.cause,
    });
    this.provider = details.provider;
    this.http_status = details.http_status;
    this.raw = raw;
    this.cancelled = details.cancelled === true;
  }
}

export function isProviderError(err: unknown): err is ProviderError {
  return err instanceof ProviderError;
}
