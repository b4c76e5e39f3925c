import { Message, SendMessageRequest, type StreamResponse, Task, taskStateToJSON } from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  createAuthenticatingFetchWithRetry,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";

/**
 * The official SDK's client as an A2A caller of a gateway's bots: 1.0 (the card resolved from the
 * bot's URL, as any 1.x client does) or 0.3 (a client given the card in its 0.3 shape, as an older
 * client reads it), with the bearer key on every request, the card's included.
 */
export async function a2aClient(url: string, key: string | undefined, version: "1.0" | "0.3" = "1.0"): Promise<Client> {
  const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
    headers: async (): Promise<Record<string, string>> => (key ? { Authorization: `Bearer ${key}` } : {}),
    shouldRetryWithHeaders: async () => undefined,
  });
  const legacyCompat = { enabled: true };
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      cardResolver: new DefaultAgentCardResolver({ fetchImpl, legacyCompat }),
      transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat })],
    }),
  );
  if (version === "1.0") return factory.createFromUrl(url);
  const response = await fetch(`${url}.well-known/agent-card.json`, { headers: key ? { Authorization: `Bearer ${key}` } : {} });
  const card = (await response.json()) as Record<string, unknown>;
  delete card["supportedInterfaces"];
  return factory.createFromAgentCard(card as never);
}

export interface SendOptions {
  messageId?: string;
  contextId?: string;
  returnImmediately?: boolean;
  /** Parts as 1.0 wire JSON instead of one text part. */
  parts?: Record<string, unknown>[];
}

/** A SendMessage request with one text part (or the given parts). */
export function a2aMessage(text: string, options: SendOptions = {}): SendMessageRequest {
  return SendMessageRequest.fromJSON({
    message: Message.toJSON(
      Message.fromJSON({
        messageId: options.messageId ?? crypto.randomUUID(),
        ...(options.contextId ? { contextId: options.contextId } : {}),
        role: "ROLE_USER",
        parts: options.parts ?? [{ text, mediaType: "text/plain" }],
      }),
    ),
    configuration: { returnImmediately: options.returnImmediately ?? false },
  });
}

/** A task's state as the 1.0 wire names it (TASK_STATE_COMPLETED, …). */
export function stateOf(task: Task): string {
  return taskStateToJSON(task.status!.state);
}

/** A task as 1.0 wire JSON, for plain assertions. */
export function taskWire(task: Task): {
  id: string;
  contextId: string;
  status: { state: string; message?: { parts: { text?: string; data?: Record<string, unknown> }[]; metadata?: Record<string, unknown> } };
  artifacts?: { parts: { text?: string }[] }[];
  history?: { role: string; parts: { text?: string }[] }[];
} {
  return Task.toJSON(task) as never;
}

/** A stream's events as `<kind>:<state>` (`task:TASK_STATE_WORKING`, `artifactUpdate:`, …). */
export async function streamKinds(events: AsyncIterable<StreamResponse>): Promise<string[]> {
  const out: string[] = [];
  for await (const e of events) {
    const value = e.payload?.value as { status?: { state: number } } | undefined;
    out.push(`${e.payload?.$case}:${value?.status ? taskStateToJSON(value.status.state as never) : ""}`);
  }
  return out;
}
