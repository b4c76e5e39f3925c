import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { MemberTurnRequest } from "@hermes/proto/hermes/v1/rooms";
import type { RoomEvent } from "../../src/rooms/core/index.js";

/**
 * An OpenAI-compatible chat endpoint that answers each room member by script: it reads which bot
 * is asking from the room prompt ("You are @<handle> in a group room") and what it has seen from
 * the messages, so a test writes "bob replies X in round 1" rather than a queue of answers in
 * turn order. A member can be held (its request waits until released or the connection drops),
 * which is how a test keeps a gateway mid-turn while it kills or stops something.
 */
export interface MemberCall {
  handle: string;
  /** The chat messages as sent (role, content, name). */
  messages: { role: string; content: string; name?: string }[];
  system: string;
  /** Answered (false while held, or when the caller went away first). */
  answered: boolean;
}

/** A reply text, or an HTTP failure to send instead. */
export type ScriptAnswer = string | { status: number; body: unknown };

export interface ScriptedProvider {
  readonly url: string;
  readonly calls: MemberCall[];
  /** Calls of one member, in order. */
  callsOf(handle: string): MemberCall[];
  /** How each member answers; `n` counts that member's calls from 0. */
  script(fn: (handle: string, n: number, call: MemberCall) => ScriptAnswer): void;
  /** Holds the next requests of `handle` until released. */
  hold(handle: string): void;
  /** Requests held right now. */
  held(handle?: string): number;
  /** Answers the held requests of `handle` with the script (or `text`) and stops holding. */
  release(handle: string, text?: string): void;
  close(): Promise<void>;
}

const ROOM_PROMPT = /You are @([A-Za-z0-9._-]+) in a group room/;

function completion(text: string): string {
  return JSON.stringify({
    id: "chatcmpl-scripted",
    object: "chat.completion",
    created: 1_700_000_000,
    model: "scripted",
    choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  });
}

export async function startScriptedProvider(): Promise<ScriptedProvider> {
  const calls: MemberCall[] = [];
  const holding = new Set<string>();
  const waiting: { handle: string; call: MemberCall; res: ServerResponse; n: number }[] = [];
  const counts = new Map<string, number>();
  let scriptFn: (handle: string, n: number, call: MemberCall) => ScriptAnswer = () => "(pass)";

  const answer = (res: ServerResponse, call: MemberCall, a: ScriptAnswer) => {
    if (res.destroyed) return;
    call.answered = true;
    if (typeof a === "string") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(completion(a));
    } else {
      res.writeHead(a.status, { "content-type": "application/json" });
      res.end(JSON.stringify(a.body));
    }
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      if (!req.url?.endsWith("/chat/completions")) {
        res.writeHead(404).end();
        return;
      }
      let messages: MemberCall["messages"] = [];
      try {
        messages = (JSON.parse(body) as { messages: MemberCall["messages"] }).messages;
      } catch {
        res.writeHead(400).end();
        return;
      }
      const system = messages.find((m) => m.role === "system")?.content ?? "";
      const handle = ROOM_PROMPT.exec(system)?.[1] ?? "?";
      const call: MemberCall = { handle, messages: messages.filter((m) => m.role !== "system"), system, answered: false };
      calls.push(call);
      const n = counts.get(handle) ?? 0;
      counts.set(handle, n + 1);
      if (holding.has(handle)) {
        waiting.push({ handle, call, res, n });
        return;
      }
      answer(res, call, scriptFn(handle, n, call));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    calls,
    callsOf: (handle) => calls.filter((c) => c.handle === handle),
    script(fn) {
      scriptFn = fn;
    },
    hold(handle) {
      holding.add(handle);
    },
    held: (handle) => waiting.filter((w) => !w.res.destroyed && (handle === undefined || w.handle === handle)).length,
    release(handle, text) {
      holding.delete(handle);
      for (const w of waiting.filter((x) => x.handle === handle)) {
        waiting.splice(waiting.indexOf(w), 1);
        answer(w.res, w.call, text ?? scriptFn(handle, w.n, w.call));
      }
    },
    async close() {
      for (const w of waiting.splice(0)) w.res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Profile config.yaml of a bot answered by the scripted endpoint (configured as provider `scripted`). */
export function scriptedBot(title = ""): Record<string, unknown> {
  return { provider: "scripted", model: "scripted-model", ...(title ? { title } : {}) };
}

/** HERMES_HOME/config.yaml and .env parts that point provider `scripted` at the endpoint. */
export function scriptedProviderConfig(url: string): { config: Record<string, unknown>; env: Record<string, string> } {
  return {
    config: { providers: { scripted: { base_url: url, api_key_env: "SCRIPTED_KEY" } } },
    env: { SCRIPTED_KEY: "sk-scripted-000" },
  };
}

export interface TurnLine {
  seq: number;
  kind: string;
  member?: string | undefined;
  round?: number | undefined;
  passed?: boolean | undefined;
  reason?: string | undefined;
  text?: string | undefined;
  turn_id?: string | undefined;
}

/** The discussion part of a log in a compact form: what tests compare. */
export function turnLines(events: readonly RoomEvent[]): TurnLine[] {
  return events
    .filter((e) => e.kind.startsWith("turn.") || e.kind.startsWith("message."))
    .map((e) => {
      const p = JSON.parse(e.payload_json) as Record<string, unknown>;
      const a = JSON.parse(e.actor_json) as Record<string, unknown>;
      const line: TurnLine = { seq: e.seq, kind: e.kind };
      if (e.kind === "message.member") line.member = a.id as string;
      else if (typeof p.member_id === "string") line.member = p.member_id;
      if (typeof p.round_index === "number") line.round = p.round_index;
      if (typeof p.passed === "boolean") line.passed = p.passed;
      if (typeof p.reason_code === "string") line.reason = p.reason_code;
      if (typeof p.text === "string") line.text = p.text;
      if (typeof p.turn_id === "string") line.turn_id = p.turn_id;
      return line;
    });
}

/** `round:member` of every turn.started, in order. */
export function startedTurns(events: readonly RoomEvent[]): string[] {
  return turnLines(events)
    .filter((l) => l.kind === "turn.started")
    .map((l) => `${l.round}:${l.member}`);
}

/** A member-turn request from gw-a (room "edge", epoch 1) for bob, who lives on gw-b. */
export function memberTurnRequest(overrides: Partial<MemberTurnRequest> = {}): MemberTurnRequest {
  return {
    room_id: "edge",
    room_name: "Edge",
    authority: { gateway_id: "gw-a", epoch: 1 },
    turn_id: "d2.r0.p1.s2.m0123456789abcdef01234567",
    member: { member_id: "bob", profile: "bob", gateway_id: "gw-b" },
    members: [
      { member_id: "alice", profile: "alice" },
      { member_id: "bob", profile: "bob", gateway_id: "gw-b" },
    ],
    seen_through_seq: 2,
    transcript: [{ seq: 2, event_id: "q", author_kind: "user", author_id: "user", text: "edge case" }],
    ...overrides,
  };
}
