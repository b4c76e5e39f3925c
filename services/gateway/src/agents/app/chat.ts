import { type Clock, type Db, HermesError, isoTime, type Logger, LruMap, newId, settlesWithin, toHermesError } from "@hermes/common";
import PQueue from "p-queue";
import { Counter, type Registry } from "prom-client";
import { MESSAGE_AGENT_TOOL, MESSAGE_AGENT_TOOL_NAME, parseMessageAgentArgs } from "../../delivery/core/message-agent-tool.js";
import type { AgentSettings } from "../../home/app/config.js";
import type { ProfileDatabases } from "../../home/store/gateway-store.js";
import type { ProfileService } from "../../identity/app/profiles.js";
import type { SessionService } from "../../identity/app/sessions.js";
import { botChatOrigin, type RoutingOrigin, routingKey } from "../../identity/core/routing-key.js";
import type { SessionRow } from "../../identity/store/sessions-store.js";
import { type TranscriptMessage, TranscriptStore } from "../../identity/store/sessions-store.js";
import { type AgentSpec, agentSignature, postTurnFallbackCheck } from "../core/agent-cache.js";
import {
  applyModelCommand,
  type ChatLocation,
  composeSystemPrompt,
  findChannelOverride,
  type ModelResolutionInput,
  parseModelCommand,
  type ResolvedModel,
  resolveModel,
} from "../core/channel-overrides.js";
import { compactTranscript } from "../core/compaction.js";
import type { ChatMessage, ToolCall, ToolSpec } from "../core/provider.js";
import { buildSystemPrompt, type PersonaText, type RosterEntry } from "../core/system-prompt.js";
import { endTurnObligation, failInterruptedTurns, type ObligationEnd, openTurnObligation } from "../store/obligations-store.js";
import { AgentCache, buildChain, endpointIdentity, type PreparedAgent } from "./agents.js";
import { LinkedSignal } from "./linked-signal.js";
import type { ModelConfigSource, ProfileModelConfig } from "./model-config.js";

export interface TurnInput {
  profile: string;
  text: string;
  session_id?: string | undefined;
  /** A platform chat (the `api` platform): its session and routing entry are created on first use. */
  origin?: Omit<RoutingOrigin, "profile"> | undefined;
  /** The parent channel of `origin`'s chat (thread → channel), for the channel-override lookup. */
  parent_id?: string | undefined;
  /** Where the channel-override lookup starts, when the platform's override keys are not its origin's ids (Telegram's `chat:topic`). */
  location?: ChatLocation | undefined;
  /** Called when the turn leaves the session's queue and starts (a platform shows "typing…" from then on). */
  onStart?: (() => void) | undefined;
  signal?: AbortSignal;
}

export interface TurnOutput {
  profile: string;
  session_id: string;
  reply: string;
  model: string;
  provider: string;
  fallback_used: boolean;
  /** Tool calls the turn executed (message_agent sends are side effects a retry would repeat). */
  tool_calls: number;
}

/** What message_agent needs (the delivery service and roster): queue a delivery on behalf of a bot, ack once it is committed. */
export interface MessageAgentHost {
  send(from: string, target: string, message: string): Promise<{ status: "queued"; delivery_id: string }>;
  /** The teammate roster of a bot's canonical Bot Chat. */
  roster(profile: string): RosterEntry[];
}

export interface ChatDeps {
  db: Db;
  profileDbs: ProfileDatabases;
  profiles: ProfileService;
  sessions: SessionService;
  clock: Clock;
  logger: Logger;
  gatewayId: string;
  /** The profiles' effective config (and secrets), re-read when the files change. */
  modelConfig: ModelConfigSource;
  /** message_agent in canonical Bot Chats; without it Bot Chats offer no tools. */
  messaging?: MessageAgentHost | undefined;
  agents?: AgentSettings | undefined;
  registry?: Registry | undefined;
}

/** Options of a turn run by the delivery ingress (inside the session's lane). */
/** A session's own `/model` choice, as the first level of model resolution. */
export function sessionModelOverride(session: SessionRow): { model: string; provider?: string } | undefined {
  return session.model_override
    ? { model: session.model_override, ...(session.provider_override ? { provider: session.provider_override } : {}) }
    : undefined;
}

/** What an agent is built from: the profile's config, the resolved model and the stable part of its prompt. */
export interface AgentRequest {
  profile: string;
  session_id: string;
  config: ProfileModelConfig;
  resolved: ResolvedModel;
  system_prompt: string;
  tools: readonly ToolSpec[];
}

export interface LockedTurnOptions {
  signal?: AbortSignal | undefined;
  location?: ChatLocation | undefined;
  /** Stored with the user message (e.g. the delivery id it came from). */
  user_meta?: Record<string, unknown> | undefined;
  /** `/model` commands are honoured in chats, not in delivered mail. */
  commands?: boolean | undefined;
  /** Record a delivery obligation for the turn (chat turns); deliveries have their own ingress row. */
  obligation?: boolean | undefined;
  /** Touch the session (updated_at, routing entry) after the turn; the delivery ingress does it in its own commit. */
  touch?: boolean | undefined;
}

const MAX_TURN_TEXT = 64 * 1024;
const BOT_CHAT_TOOLS: readonly ToolSpec[] = [MESSAGE_AGENT_TOOL];
const NO_TOOLS: readonly ToolSpec[] = [];
/** At most this many new transcript rows are added to a remembered conversation (more: the whole transcript is read). */
const HISTORY_PAGE = 64;
/** Conversations remembered per warm-agent slot: sessions whose agent lost its slot keep theirs for a while. */
const CONVERSATIONS_PER_WARM_AGENT = 2;

/** A turn being run: its signal, and why it was stopped when its profile was deleted. */
interface RunningTurn {
  linked: LinkedSignal;
  deleted: HermesError | undefined;
}

/** A session's conversation as provider messages, as of transcript seq `seq`. */
interface RememberedConversation {
  seq: number;
  messages: readonly ChatMessage[];
}

export const DEFAULT_AGENT_SETTINGS: AgentSettings = { maxWarm: 32, idleMs: 600_000, slotWaitMs: 30_000, maxToolRounds: 4 };

/** The canonical Bot Chat of its profile (the only place message_agent and the roster exist). */
export function isCanonicalBotChat(session: SessionRow): boolean {
  return session.kind === "bot_chat" && session.session_key === routingKey(botChatOrigin(session.profile_name));
}

function locationOf(origin: Omit<RoutingOrigin, "profile">, parentId?: string): ChatLocation {
  return { platform: origin.platform, chat_id: origin.chat_id, thread_id: origin.thread_id, parent_id: parentId };
}

/** Stored transcript → provider messages. Notifications reach the model as user messages (see meta.model_text). */
export function toChatMessages(history: readonly TranscriptMessage[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (const m of history) {
    switch (m.role) {
      case "user":
        out.push({ role: "user", content: m.content });
        break;
      case "assistant": {
        const calls = Array.isArray(m.meta["tool_calls"]) ? (m.meta["tool_calls"] as ToolCall[]) : undefined;
        out.push({ role: "assistant", content: m.content, ...(calls && calls.length > 0 ? { tool_calls: calls } : {}) });
        break;
      }
      case "tool":
        out.push({
          role: "tool",
          tool_call_id: String(m.meta["tool_call_id"] ?? ""),
          ...(typeof m.meta["name"] === "string" ? { name: m.meta["name"] } : {}),
          content: m.content,
        });
        break;
      case "notification":
        out.push({ role: "user", content: typeof m.meta["model_text"] === "string" ? m.meta["model_text"] : m.content });
        break;
    }
  }
  return out;
}

type NewMessage = Omit<TranscriptMessage, "seq">;

const sameList = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);

function sameSpec(a: AgentSpec, b: AgentSpec): boolean {
  return (
    a.profile === b.profile &&
    a.model === b.model &&
    a.provider === b.provider &&
    a.provider_endpoint === b.provider_endpoint &&
    sameList(a.fallback_providers, b.fallback_providers) &&
    a.system_prompt === b.system_prompt &&
    a.ephemeral_system_prompt === b.ephemeral_system_prompt &&
    sameList(a.tools, b.tools)
  );
}

/**
 * The turn engine. Turns are one at a time per session (a second turn queues behind the running
 * one, never refused). Each turn resolves its model (session `/model` > channel override > global;
 * the profile's config.yaml over the gateway's), takes the session's warm agent (rebuilt only when
 * what it was built from changed), runs provider → tools → provider (bounded), stores the turn
 * (never the system prompt) and runs the post-turn fallback check that may evict the agent.
 */
export class ChatService {
  private readonly lanes = new Map<string, PQueue>();
  /** Work queued in a lane and not started yet, so a stop can reject it instead of leaving it hanging. */
  private readonly waiting = new Map<string, Set<(err: unknown) => void>>();
  /** The turn running in each session, so deleting its profile (or a stop past its grace) can stop it. */
  private readonly running = new Map<string, RunningTurn>();
  readonly modelConfig: ModelConfigSource;
  readonly agents: AgentCache;
  private readonly settings: AgentSettings;
  private readonly host: MessageAgentHost | undefined;
  private stopping = false;
  /** Set when a stop's grace ran out: running turns were cancelled with it, and any that starts after is. */
  private cancelledBy: HermesError | undefined;
  private readonly turnCounter: Counter<"kind" | "outcome">;
  /** Each profile's last system prompt and the persona (the config's object: unchanged files, same object) and roster it was built from. */
  private readonly prompts = new Map<string, { persona: PersonaText; roster: RosterEntry[] | undefined; text: string }>();
  /** The last agent spec built from each config object (see specOf). */
  private readonly lastSpecs = new WeakMap<ProfileModelConfig, { spec: AgentSpec; signature: string }>();
  /**
   * The conversations of the most recently used sessions as of their last turn, so a turn reads
   * only what was added since. It outlives a session's warm agent (an agent rebuilt for a config
   * change, or after its slot went to another session, still starts from here).
   */
  private readonly conversations: LruMap<string, RememberedConversation>;

  constructor(private readonly deps: ChatDeps) {
    this.settings = deps.agents ?? DEFAULT_AGENT_SETTINGS;
    this.modelConfig = deps.modelConfig;
    this.host = deps.messaging;
    this.agents = new AgentCache(this.settings, deps.clock, deps.logger, deps.registry);
    this.conversations = new LruMap(CONVERSATIONS_PER_WARM_AGENT * this.settings.maxWarm);
    this.turnCounter = new Counter({
      name: "hermes_turns_total",
      help: "Turns run by the engine, by kind (chat, delivery) and outcome",
      labelNames: ["kind", "outcome"] as const,
      registers: deps.registry ? [deps.registry] : [],
    });
    deps.profiles.events.on("stopping", (name) => this.stopProfile(name));
  }

  private lane(sessionId: string): PQueue {
    let lane = this.lanes.get(sessionId);
    if (!lane) {
      const created = new PQueue({ concurrency: 1 });
      created.on("idle", () => {
        if (created.size === 0 && created.pending === 0 && this.lanes.get(sessionId) === created) this.lanes.delete(sessionId);
      });
      this.lanes.set(sessionId, created);
      lane = created;
    }
    return lane;
  }

  /** Drops a session's queued (not yet started) work; each caller is told why. */
  private dropQueued(sessionId: string, why: HermesError): void {
    this.lanes.get(sessionId)?.clear();
    const waiting = this.waiting.get(sessionId);
    if (!waiting) return;
    this.waiting.delete(sessionId);
    for (const reject of waiting) reject(why);
  }

  private session(profile: string, input: Pick<TurnInput, "session_id" | "origin">): SessionRow {
    if (input.origin) {
      const origin: RoutingOrigin = { ...input.origin, profile };
      return this.deps.sessions.ensure(
        origin,
        "api",
        `${origin.platform} ${origin.chat_id}${origin.thread_id ? ` / ${origin.thread_id}` : ""}`,
      );
    }
    if (!input.session_id) return this.deps.sessions.botChat(profile);
    const session = this.deps.sessions.store.byId(input.session_id);
    if (!session || session.profile_name !== profile) {
      throw new HermesError("not_found", `session ${input.session_id} does not belong to profile ${profile}`);
    }
    return session;
  }

  /** One turn from a person (CLI chat, the api platform): queued behind the session's running turn. */
  async turn(input: TurnInput): Promise<TurnOutput> {
    if (typeof input.text !== "string" || input.text.trim().length === 0)
      throw new HermesError("invalid_params", "a chat turn needs text (-q TEXT)");
    if (input.text.length > MAX_TURN_TEXT) {
      throw new HermesError("payload_too_large", `text is ${input.text.length} characters; the limit is ${MAX_TURN_TEXT}`, {
        data: { limit: MAX_TURN_TEXT },
      });
    }
    this.assertRunning();
    const profile = this.deps.profiles.resolve(input.profile);
    // A renamed profile whose identity migration is unfinished gets no new rows until it is.
    this.deps.profiles.assertIdentitySettled(profile);
    const session = this.session(profile, input);
    const location = input.location ?? (input.origin ? locationOf(input.origin, input.parent_id) : undefined);
    return this.exclusive(session.session_id, () => {
      input.onStart?.();
      return this.runLocked(profile, session, input.text, { signal: input.signal, location, commands: true, obligation: true });
    });
  }

  /** Runs `fn` in the session's lane: after the turns queued before it, before the ones queued after. */
  exclusive<T>(sessionId: string, fn: () => Promise<T>): Promise<T> {
    this.assertRunning();
    return new Promise<T>((resolve, reject) => {
      let set = this.waiting.get(sessionId);
      if (!set) {
        set = new Set();
        this.waiting.set(sessionId, set);
      }
      const waiting = set;
      waiting.add(reject);
      void this.lane(sessionId).add(async () => {
        if (!waiting.delete(reject)) return; // dropped by a stop before it started
        if (waiting.size === 0 && this.waiting.get(sessionId) === waiting) this.waiting.delete(sessionId);
        try {
          resolve(await fn());
        } catch (err) {
          reject(err);
        }
      });
    });
  }

  /** The newest messages of a profile's canonical Bot Chat, oldest first (the console's Bot Chat view). */
  botChatHistory(profileName: string, limit: number): TranscriptMessage[] {
    const profile = this.deps.profiles.resolve(profileName);
    const session = this.deps.sessions.botChat(profile);
    return new TranscriptStore(this.deps.profileDbs.get(profile)).list(session.session_id, limit);
  }

  /** Profiles with work running in one of their sessions now (a chat, delivery or room turn): "active now". */
  activeProfiles(): Set<string> {
    const active = new Set<string>();
    for (const [sessionId, lane] of this.lanes) {
      if (lane.pending === 0) continue;
      const session = this.deps.sessions.store.byId(sessionId);
      if (session) active.add(session.profile_name);
    }
    return active;
  }

  private assertRunning(): void {
    if (this.stopping) throw new HermesError("runtime_offline", "the gateway is stopping; try again when it is back");
  }

  /**
   * Replaces a session's transcript with a shorter one (context compaction before the single
   * retry after context_overflow). Must run inside the session's lane. Resolves, once the shorter transcript
   * is on disk, to the number of messages removed.
   */
  async compact(profile: string, sessionId: string): Promise<number> {
    const db = this.deps.profileDbs.get(profile);
    const transcript = new TranscriptStore(db);
    const result = compactTranscript(transcript.list(sessionId), isoTime(this.deps.clock.now()));
    if (!result) return 0;
    transcript.replace(sessionId, result.messages);
    this.conversations.delete(sessionId);
    await this.deps.profileDbs.durable(db);
    this.deps.logger.info({ session_id: sessionId, removed: result.removed }, "transcript compacted");
    return result.removed;
  }

  /**
   * A turn in a session whose lane the caller holds (via `exclusive`). Failures reject with a
   * HermesError whose `data.tool_effects` counts tool calls already executed.
   */
  async runLocked(
    profile: string,
    queuedAs: Pick<SessionRow, "session_id">,
    text: string,
    options: LockedTurnOptions = {},
  ): Promise<TurnOutput> {
    const kind = options.obligation === false ? "delivery" : "chat";
    // A rename while the turn waited moved its session to the new name; the turn follows it.
    const session = this.currentSession(queuedAs.session_id, profile);
    // One signal for the turn: the caller's, or this service's own abort (a delete, a stop).
    const turn: RunningTurn = { linked: new LinkedSignal([options.signal]), deleted: undefined };
    if (this.cancelledBy) turn.linked.abort(this.cancelledBy);
    this.running.set(session.session_id, turn);
    const finish = options.obligation === false ? () => {} : this.openObligation(session);
    const signal = turn.linked.signal;
    const effects = { tool_calls: 0 };
    try {
      const out = await this.engine(session, text, options, signal, effects);
      finish("delivered");
      this.turnCounter.inc({ kind, outcome: "ok" });
      return out;
    } catch (err) {
      finish("failed");
      this.turnCounter.inc({ kind, outcome: "failed" });
      // A turn stopped because its profile was deleted says that, not how the provider call ended.
      const e = toHermesError(turn.deleted ?? err);
      e.data["tool_effects"] = effects.tool_calls;
      throw e;
    } finally {
      turn.linked.dispose();
      if (this.running.get(session.session_id) === turn) this.running.delete(session.session_id);
    }
  }

  /**
   * The session as it is now. A turn is bound to its session, not to a profile name: a rename
   * rekeys the row (the turn goes on under the new name), a delete removes it (the turn ends).
   */
  private currentSession(sessionId: string, profile: string): SessionRow {
    const session = this.deps.sessions.store.byId(sessionId);
    if (!session) {
      throw new HermesError("profile_deleted", `profile ${profile} was deleted while its turn was under way; nothing was stored`, {
        data: { profile },
      });
    }
    return session;
  }

  private openObligation(session: SessionRow): (state: ObligationEnd) => void {
    const { db, clock } = this.deps;
    const id = newId("obl");
    const now = () => isoTime(clock.now());
    openTurnObligation(db, {
      obligation_id: id,
      profile: session.profile_name,
      session_key: session.session_key,
      session_id: session.session_id,
      now: now(),
    });
    return (state) => {
      try {
        endTurnObligation(db, id, state, now());
      } catch (err) {
        this.deps.logger.warn({ err, obligation_id: id }, "updating a turn obligation failed");
      }
    };
  }

  private async engine(
    session: SessionRow,
    text: string,
    options: LockedTurnOptions,
    signal: AbortSignal,
    effects: { tool_calls: number },
  ): Promise<TurnOutput> {
    const profile = session.profile_name;
    const config = this.modelConfig.forProfile(profile);
    const location = options.location ?? locationOf(session.origin);
    const channel = findChannelOverride(config.platforms, location);
    const sessionOverride = sessionModelOverride(session);

    if (options.commands && /^\/model(\s|$)/.test(text.trim())) return this.modelCommand(profile, session, text, channel, config.global);

    const resolution: ModelResolutionInput = { session: sessionOverride, channel: channel?.override, global: config.global };
    const resolved = resolveModel(resolution);
    const botChat = isCanonicalBotChat(session);
    const host = this.host;
    const tools = botChat && host ? BOT_CHAT_TOOLS : NO_TOOLS;
    const base = this.systemPrompt(profile, config.persona, botChat && host ? host.roster(profile) : undefined);
    const agent = await this.acquireAgent(
      { profile, session_id: session.session_id, config, resolved, system_prompt: base, tools },
      signal,
    );

    let evict: false | { why: string; detail?: string } = false;
    try {
      const conversation = this.history(new TranscriptStore(this.deps.profileDbs.get(profile)), session.session_id);
      const now = () => isoTime(this.deps.clock.now());
      const stored: NewMessage[] = [{ role: "user", content: text, meta: options.user_meta ?? {}, created_at: now() }];
      conversation.push({ role: "user", content: text });
      let fallbackActive = false;
      let served = { provider: resolved.provider, model: resolved.model };
      let reply = "";
      for (let round = 0; ; round++) {
        const outcome = await agent.chain.complete({
          model: resolved.model,
          system_prompt: agent.system_prompt,
          messages: conversation,
          tools: agent.tools,
          turn_kind: "direct",
          signal,
        });
        fallbackActive ||= outcome.fallback_active;
        served = { provider: outcome.served_by.provider, model: outcome.served_by.model };
        const result = outcome.result;
        const meta = { model: served.model, provider: served.provider, ...(outcome.fallback_active ? { fallback: true } : {}) };
        if (result.kind === "text") {
          reply = result.text;
          stored.push({ role: "assistant", content: reply, meta, created_at: now() });
          conversation.push({ role: "assistant", content: reply });
          break;
        }
        if (round >= this.settings.maxToolRounds) {
          // Bounded: a model that keeps calling tools gets its text so far, plus a word on why it stopped.
          reply = `${result.text ?? ""}${result.text ? "\n\n" : ""}(stopped after ${this.settings.maxToolRounds} rounds of tool calls)`;
          stored.push({ role: "assistant", content: reply, meta, created_at: now() });
          conversation.push({ role: "assistant", content: reply });
          break;
        }
        const assistantText = result.text ?? "";
        conversation.push({ role: "assistant", content: assistantText, tool_calls: result.tool_calls });
        stored.push({ role: "assistant", content: assistantText, meta: { ...meta, tool_calls: result.tool_calls }, created_at: now() });
        for (const call of result.tool_calls) {
          const content = await this.runTool(profile, tools, call, effects);
          conversation.push({ role: "tool", tool_call_id: call.id, name: call.name, content });
          stored.push({ role: "tool", content, meta: { tool_call_id: call.id, name: call.name }, created_at: now() });
        }
      }
      // Stored where the session is now: a rename while the provider answered moved the profile.
      const current = this.currentSession(session.session_id, profile);
      const owner = current.profile_name;
      const db = this.deps.profileDbs.get(owner);
      const appended = new TranscriptStore(db).append(session.session_id, stored);
      const lastSeq = appended.at(-1)?.seq;
      // Remembered, so the next turn reads only what was added since.
      if (lastSeq !== undefined) this.conversations.set(session.session_id, { seq: lastSeq, messages: conversation });
      // No await since `current` was read: the row is still the session as it is now.
      if (options.touch !== false) this.deps.sessions.touchRow(current);
      // The turn is answered (and a delivery settled) only once its messages are on disk.
      await this.deps.profileDbs.durable(db);
      const verdict = postTurnFallbackCheck(
        { model: served.model, provider: served.provider, fallback_active: fallbackActive },
        resolution,
      );
      if (verdict.evict) evict = { why: verdict.why, detail: verdict.detail };
      return {
        profile: owner,
        session_id: session.session_id,
        reply,
        model: served.model,
        provider: served.provider,
        fallback_used: fallbackActive,
        tool_calls: effects.tool_calls,
      };
    } finally {
      this.agents.release(session.session_id, evict);
    }
  }

  /**
   * The conversation so far as provider messages. The memo has it up to the seq of the session's
   * last turn, so a turn needs only that row (still there: the transcript was not replaced) and
   * the ones added since (notifications and other writers append through the transcript, so new
   * rows have the next seqs): kept by the transcript store when this process wrote them, else read;
   * when it has forgotten the session, or more than a page is new, the turn reads the whole
   * transcript.
   */
  private history(transcript: TranscriptStore, sessionId: string): ChatMessage[] {
    const cached = this.conversations.get(sessionId);
    if (cached) {
      const rows = transcript.keptFrom(sessionId, cached.seq) ?? transcript.from(sessionId, cached.seq, HISTORY_PAGE + 2);
      if (rows[0]?.seq === cached.seq && rows.length <= HISTORY_PAGE + 1) {
        return rows.length === 1 ? [...cached.messages] : [...cached.messages, ...toChatMessages(rows.slice(1))];
      }
    }
    return toChatMessages(transcript.list(sessionId));
  }

  /**
   * The bot's own system prompt, rebuilt only when its persona or roster changed (the roster list is
   * shared until the delivery service rebuilds it), so a busy bot does not rebuild a long roster
   * text on every turn.
   */
  private systemPrompt(profile: string, persona: PersonaText, roster: RosterEntry[] | undefined): string {
    const memo = this.prompts.get(profile);
    if (memo && memo.persona === persona && memo.roster === roster) return memo.text;
    const text = buildSystemPrompt(persona, roster);
    this.prompts.set(profile, { persona, roster, text });
    return text;
  }

  /** Executes one tool call; the result (or a typed error) goes back to the model as JSON. */
  private async runTool(profile: string, offered: readonly ToolSpec[], call: ToolCall, effects: { tool_calls: number }): Promise<string> {
    try {
      if (call.name !== MESSAGE_AGENT_TOOL_NAME || !offered.some((t) => t.name === call.name) || !this.host) {
        throw new HermesError("method_not_found", `tool ${call.name} is not available in this chat`);
      }
      const args = parseMessageAgentArgs(call.arguments);
      const ack = await this.host.send(profile, args.target, args.message);
      effects.tool_calls++;
      return JSON.stringify(ack);
    } catch (err) {
      const e = toHermesError(err);
      return JSON.stringify({ error: e.message, reason: e.reason, ...e.data });
    }
  }

  /** `/model` in a chat: a session override, `--global` (profile config), `--reset`, or a report. */
  private modelCommand(
    profile: string,
    session: SessionRow,
    text: string,
    channel: ReturnType<typeof findChannelOverride>,
    global: ModelResolutionInput["global"],
  ): TurnOutput {
    const command = parseModelCommand(text);
    const current = session.model_override
      ? { model: session.model_override, ...(session.provider_override ? { provider: session.provider_override } : {}) }
      : undefined;
    const outcome = applyModelCommand(command, { session: current, channel, global });
    if (outcome.global_write) this.modelConfig.writeGlobalModel(profile, outcome.global_write.model, outcome.global_write.provider);
    if (command.kind !== "show") {
      this.deps.sessions.store.setModelOverride(session.session_id, outcome.session?.model ?? null, outcome.session?.provider ?? null);
    }
    return {
      profile,
      session_id: session.session_id,
      reply: outcome.notice,
      model: outcome.effective.model,
      provider: outcome.effective.provider,
      fallback_used: false,
      tool_calls: 0,
    };
  }

  /** Turns that were running when the process died: their obligations are marked failed, never re-run. */
  recoverInterruptedTurns(): number {
    return failInterruptedTurns(this.deps.db, isoTime(this.deps.clock.now()));
  }

  /** Before a profile is deleted: its queued turns are dropped and its running ones stopped, each caller told why. */
  stopProfile(profile: string): void {
    const why = () =>
      new HermesError("profile_deleted", `profile ${profile} was deleted (hermes profile delete ${profile}); its turns were stopped`, {
        data: { profile },
      });
    for (const session of this.deps.sessions.store.listByProfile(profile)) {
      this.dropQueued(session.session_id, why());
      const turn = this.running.get(session.session_id);
      if (turn) {
        turn.deleted = why();
        turn.linked.abort(turn.deleted);
      }
      this.agents.evict(session.session_id);
      this.conversations.delete(session.session_id);
    }
  }

  /**
   * The session's warm agent for this turn: reused while its signature (model, provider chain,
   * prompt, tools) is unchanged, built otherwise (the agent cache). Chat turns and room member
   * turns both come through here.
   */
  acquireAgent(r: AgentRequest, signal?: AbortSignal): Promise<PreparedAgent> {
    const { spec, signature } = this.specOf(r);
    return this.agents.acquire(
      r.session_id,
      signature,
      (): PreparedAgent => ({
        session_id: r.session_id,
        spec,
        signature,
        chain: buildChain(r.config, r.resolved),
        system_prompt: composeSystemPrompt(r.system_prompt, r.resolved.ephemeral_system_prompt),
        tools: r.tools,
        built_at: this.deps.clock.now(),
      }),
      signal,
    );
  }

  /**
   * The agent spec of a request and its signature. Hashing the spec (its prompt carries the whole
   * roster) is skipped when it equals the last one built from the same config object (a profile's
   * config is the same object while its files are unchanged).
   */
  private specOf(r: AgentRequest): { spec: AgentSpec; signature: string } {
    const spec: AgentSpec = {
      profile: r.profile,
      model: r.resolved.model,
      provider: r.resolved.provider,
      provider_endpoint: endpointIdentity(r.config, [r.resolved.provider, ...r.config.fallback_providers]),
      fallback_providers: r.config.fallback_providers,
      system_prompt: r.system_prompt,
      ephemeral_system_prompt: r.resolved.ephemeral_system_prompt,
      tools: r.tools.map((t) => t.name),
    };
    const last = this.lastSpecs.get(r.config);
    if (last && sameSpec(last.spec, spec)) return last;
    const memo = { spec, signature: agentSignature(spec) };
    this.lastSpecs.set(r.config, memo);
    return memo;
  }

  /**
   * Graceful stop: no new turns; queued ones are dropped (their callers get an error, deliveries
   * stay queued in the database); running ones get `graceMs` to finish, then are cancelled.
   */
  async stop(graceMs = 10_000): Promise<void> {
    this.stopping = true;
    const why = new HermesError("runtime_offline", "the gateway is stopping; queued work stays queued for the next start");
    for (const sessionId of [...new Set([...this.lanes.keys(), ...this.waiting.keys()])]) this.dropQueued(sessionId, why);
    const idle = Promise.all([...this.lanes.values()].map((l) => l.onIdle()));
    const expired = !(await settlesWithin(idle, graceMs));
    if (expired) {
      this.deps.logger.warn({ grace_ms: graceMs }, "cancelling turns still running at shutdown");
      this.cancelledBy = new HermesError("runtime_offline", "the gateway is stopping");
      for (const turn of this.running.values()) turn.linked.abort(this.cancelledBy);
      await idle;
    }
    this.agents.stop();
  }
}
