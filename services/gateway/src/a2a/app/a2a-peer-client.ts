import { HermesError, peerKeyVariable, toHermesError } from "@hermes/common";
import { DEFAULT_PROFILE } from "@hermes/contract";
import type { ModelConfigSource } from "../../agents/app/model-config.js";
import { type AgentOutcome, agentOutcome, SENDER_METADATA_KEY } from "../core/wire.js";

/**
 * Calling A2A agents registered as peers (`a2a.peers.<name>` in HERMES_HOME/config.yaml, written by
 * `hermes peer add NAME --a2a URL [--key-env VAR]`), with the official SDK's client: the card is
 * read from the URL, then JSON-RPC (1.0, or 0.3 for older agents) or HTTP+JSON as the card offers.
 * Every call has a deadline and reads at most MAX_RESPONSE_BYTES, so an agent that hangs or
 * answers without end costs a bounded wait and bounded memory; its failures become the typed
 * reasons of deliveries.
 */

/** The most an agent's answer (a card, a task) may weigh. */
export const MAX_RESPONSE_BYTES = 8 * 1024 * 1024;
/** How often a task the agent left running is looked at again (agents that answer before they finish). */
const POLL_MS = 1000;

export interface A2aPeerEntry {
  name: string;
  url: string;
  /** The variable holding the bearer key (`key_env`, else HERMES_PEER_<NAME>_KEY). */
  key_variable: string;
  /** The key, when set (HERMES_HOME/.env or the environment); an agent may need none. */
  key: string | undefined;
}

/** The A2A agents registered as peers, read when used (an edit applies without a restart). */
export interface A2aPeerDirectory {
  names(): string[];
  get(name: string): A2aPeerEntry | undefined;
}

export function a2aPeerDirectory(config: ModelConfigSource): A2aPeerDirectory {
  const peers = () => config.gatewayConfig().a2a?.peers ?? {};
  return {
    names: () => Object.keys(peers()).sort(),
    get: (name) => {
      const entry = peers()[name];
      if (!entry) return undefined;
      const variable = entry.key_env ?? peerKeyVariable(name);
      return { name, url: entry.url, key_variable: variable, key: config.forProfile(DEFAULT_PROFILE).secret(variable) };
    },
  };
}

export interface A2aSend {
  text: string;
  /** The messageId: a delivery's id, so a resend is the same message to an agent that dedupes (a Hermes gateway does). */
  message_id: string;
  /** The bot that writes it, stated to the agent (a Hermes gateway attributes the message to it). */
  sender?: { name: string; handle: string } | undefined;
}

export interface A2aAnswer {
  outcome: AgentOutcome;
  /** The agent's task, when it made one. */
  task_id: string | undefined;
}

type SdkClient = import("@a2a-js/sdk/client").Client;

/** What went wrong talking to an agent, as the reason a delivery records. */
function peerError(peer: A2aPeerEntry, err: unknown, deadline: { ms: number; hit: boolean }, accepted: boolean): HermesError {
  const where = `A2A agent ${peer.name} (${peer.url})`;
  if (err instanceof HermesError && err.data["a2a_peer"] === peer.name) return err;
  if (deadline.hit) {
    return new HermesError(
      "delivery_timeout",
      `${where} did not answer within ${Math.round(deadline.ms / 1000)} s${accepted ? " (it had accepted the message)" : ""}`,
      { data: { a2a_peer: peer.name, accepted } },
    );
  }
  const e = err as Error & { cause?: { code?: string; message?: string } };
  const text = e?.message ?? String(err);
  const status = /(?:Status: |: )(\d{3})\b/.exec(text)?.[1];
  if (status === "401" || status === "403") {
    const hint = peer.key
      ? `it refused the key in ${peer.key_variable}; set the right one in HERMES_HOME/.env`
      : `it wants a key: set ${peer.key_variable} in HERMES_HOME/.env (or hermes peer add ${peer.name} --a2a ${peer.url} --key-env VAR)`;
    return new HermesError("provider_auth_or_access", `${where}: ${hint}`, {
      data: { a2a_peer: peer.name, key_variable: peer.key_variable },
    });
  }
  const code = e?.cause?.code;
  if (text === "fetch failed" || code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "ECONNRESET" || code === "UND_ERR_SOCKET") {
    const why =
      code === "ECONNREFUSED" ? "connection refused" : code === "ENOTFOUND" ? "cannot resolve its host" : (e.cause?.message ?? text);
    return new HermesError("runtime_offline", `cannot reach ${where}: ${why}`, { data: { a2a_peer: peer.name } });
  }
  const typed = toHermesError(err);
  const said = typed.reason === "internal" ? text : typed.message;
  return new HermesError("unknown", `${where}: ${said}`, { data: { a2a_peer: peer.name, peer_error: e?.name ?? "Error" }, cause: err });
}

/** `fetch` with the key, one deadline for the whole exchange, and a cap on what a body may hold. */
function boundedFetch(key: string | undefined, signal: AbortSignal, peer: string): typeof fetch {
  return async (input, init) => {
    const headers = new Headers(init?.headers);
    if (key !== undefined) headers.set("authorization", `Bearer ${key}`);
    const own = init?.signal ? AbortSignal.any([init.signal, signal]) : signal;
    const response = await fetch(input, { ...init, headers, signal: own });
    if (!response.body) return response;
    let seen = 0;
    const capped = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          seen += chunk.byteLength;
          if (seen > MAX_RESPONSE_BYTES) {
            controller.error(
              new HermesError("unknown", `A2A agent ${peer} answered more than ${MAX_RESPONSE_BYTES} bytes; the answer was dropped`, {
                data: { a2a_peer: peer, limit: MAX_RESPONSE_BYTES },
              }),
            );
          } else controller.enqueue(chunk);
        },
      }),
    );
    return new Response(capped, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

/** The card's URL as the SDK's resolver takes it: a base with a trailing slash, or the card's own URL. */
function cardLocation(url: string): [string, string | undefined] {
  if (url.endsWith(".json")) return [url, ""];
  return [url.endsWith("/") ? url : `${url}/`, undefined];
}

/**
 * One exchange with an A2A agent, under one deadline: reads its card, then sends, reads or cancels
 * a task. `describe` names the agent in every failure.
 */
export class A2aPeerClient {
  private readonly deadline: { ms: number; hit: boolean };
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private client: Promise<SdkClient> | undefined;

  private constructor(
    readonly peer: A2aPeerEntry,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ) {
    this.deadline = { ms: timeoutMs, hit: false };
    this.timer = setTimeout(() => {
      this.deadline.hit = true;
      this.controller.abort(new HermesError("delivery_timeout", `no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    this.timer.unref();
    signal?.addEventListener("abort", () => this.controller.abort(signal.reason), { once: true });
  }

  /** A client for a registered agent; an unknown name is missing_config saying how to register it. */
  static open(directory: A2aPeerDirectory, name: string, options: { timeoutMs: number; signal?: AbortSignal | undefined }): A2aPeerClient {
    const peer = directory.get(name);
    if (!peer) {
      throw new HermesError(
        "missing_config",
        `unknown A2A peer ${name}: register it with hermes peer add ${name} --a2a URL [--key-env VAR]`,
        {
          data: { peer: name },
        },
      );
    }
    return new A2aPeerClient(peer, options.timeoutMs, options.signal);
  }

  get describe(): string {
    return `A2A agent ${this.peer.name} (${this.peer.url})`;
  }

  private sdk(): Promise<SdkClient> {
    this.client ??= (async () => {
      const { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory, RestTransportFactory } = await import(
        "@a2a-js/sdk/client"
      );
      const fetchImpl = boundedFetch(this.peer.key, this.controller.signal, this.peer.name);
      const legacyCompat = { enabled: true };
      const factory = new ClientFactory(
        ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
          cardResolver: new DefaultAgentCardResolver({ fetchImpl, legacyCompat }),
          transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat }), new RestTransportFactory({ fetchImpl, legacyCompat })],
          preferredTransports: ["JSONRPC"],
        }),
      );
      const [base, path] = cardLocation(this.peer.url);
      return factory.createFromUrl(base, path);
    })();
    return this.client;
  }

  private async guarded<T>(accepted: () => boolean, fn: (client: SdkClient) => Promise<T>): Promise<T> {
    try {
      return await fn(await this.sdk());
    } catch (err) {
      throw peerError(this.peer, err, this.deadline, accepted());
    }
  }

  /**
   * Sends one message and waits for the agent's answer: a blocking send, then (for an agent that
   * answers before its task ends) a look at the task every second, all within the deadline.
   */
  async send(message: A2aSend): Promise<A2aAnswer> {
    const { Message, SendMessageRequest, Task } = await import("@a2a-js/sdk");
    let taskId: string | undefined;
    return this.guarded(
      () => taskId !== undefined,
      async (client) => {
        const request = SendMessageRequest.fromJSON({
          message: {
            messageId: message.message_id,
            role: "ROLE_USER",
            parts: [{ text: message.text, mediaType: "text/plain" }],
            ...(message.sender ? { metadata: { [SENDER_METADATA_KEY]: message.sender } } : {}),
          },
          configuration: { returnImmediately: false },
        });
        const signal = this.controller.signal;
        const result = await client.sendMessage(request, { signal });
        if ("messageId" in result) return { outcome: agentOutcome({ message: Message.toJSON(result) }), task_id: undefined };
        taskId = result.id;
        let outcome = agentOutcome({ task: Task.toJSON(result) });
        while (outcome.kind === "open") {
          await new Promise((resolve) => setTimeout(resolve, POLL_MS));
          if (signal.aborted) throw signal.reason;
          outcome = agentOutcome({ task: Task.toJSON(await client.getTask({ tenant: "", id: result.id }, { signal })) });
        }
        return { outcome, task_id: result.id };
      },
    );
  }

  /** A task of the agent's, as its outcome so far. */
  async task(taskId: string): Promise<A2aAnswer> {
    const { Task } = await import("@a2a-js/sdk");
    return this.guarded(
      () => true,
      async (client) => ({
        outcome: agentOutcome({ task: Task.toJSON(await client.getTask({ tenant: "", id: taskId }, { signal: this.controller.signal })) }),
        task_id: taskId,
      }),
    );
  }

  /** Asks the agent to cancel a task; answers with the task as the agent then reports it. */
  async cancel(taskId: string): Promise<A2aAnswer> {
    const { Task } = await import("@a2a-js/sdk");
    return this.guarded(
      () => true,
      async (client) => ({
        outcome: agentOutcome({
          task: Task.toJSON(await client.cancelTask({ tenant: "", id: taskId, metadata: undefined }, { signal: this.controller.signal })),
        }),
        task_id: taskId,
      }),
    );
  }

  close(): void {
    clearTimeout(this.timer);
    this.controller.abort(new HermesError("runtime_offline", "the exchange is over"));
  }
}
