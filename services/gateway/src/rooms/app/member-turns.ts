import { type Clock, HermesError, isoTime, type Logger, toHermesError } from "@hermes/common";
import { type ChatService, sessionModelOverride } from "../../agents/app/chat.js";
import { postTurnFallbackCheck } from "../../agents/core/agent-cache.js";
import { findChannelOverride, resolveModel } from "../../agents/core/channel-overrides.js";
import { buildSystemPrompt } from "../../agents/core/system-prompt.js";
import type { ProfileDatabases } from "../../home/store/gateway-store.js";
import type { ProfileService } from "../../identity/app/profiles.js";
import type { SessionService } from "../../identity/app/sessions.js";
import type { SessionRow } from "../../identity/store/sessions-store.js";
import { type TranscriptMessage, TranscriptStore } from "../../identity/store/sessions-store.js";
import { isPass } from "../core/discussion.js";
import type { Authority, Member } from "../core/index.js";
import { type MemberTurnRequest, type MemberTurnResult, roomChatMessages, roomTurnPrompt } from "../core/member-turn.js";

/** The routing origin of a member's room session: `agent:<profile>:room:group:<room_id>`. */
export function roomSessionOrigin(profile: string, roomId: string) {
  return { profile, platform: "room", chat_type: "group", chat_id: roomId };
}

export interface LocalMemberTurnsDeps {
  chat: ChatService;
  profiles: ProfileService;
  sessions: SessionService;
  profileDbs: ProfileDatabases;
  clock: Clock;
  logger: Logger;
}

/** Recent turn outcomes kept so a repeated request for the same turn id answers without running again. */
const REMEMBERED_TURNS = 512;

type Remembered = { ok: true; result: MemberTurnResult } | { ok: false; error: HermesError };

/**
 * Member turns of profiles on THIS gateway, through the turn engine's pieces: the
 * member's room session (created on first use, with its routing entry), its lane (one turn at a
 * time per session, queued behind whatever runs there), model resolution (session `/model` >
 * channel override for platform `room` > global), the warm-agent cache and the provider chain
 * with fallback and the post-turn fallback check. The provider gets `turn_kind: "room"`, so the
 * local provider passes when the room is not talking to it. The room messages the member had not
 * stored yet and its reply are kept in the session's transcript; the room prompt is not.
 *
 * Turns are keyed by (room, turn id): a request for a turn that is running joins it, one that
 * ended recently gets the same outcome again, so a retried RPC never runs a turn twice.
 */
export class LocalMemberTurns {
  private readonly running = new Map<string, Promise<MemberTurnResult>>();
  private readonly remembered = new Map<string, Remembered>();

  constructor(private readonly deps: LocalMemberTurnsDeps) {}

  /** Null when the member's profile is here; otherwise why the driver cannot run it. */
  unavailable(member: Member): string | null {
    try {
      this.deps.profiles.resolve(member.profile);
      return null;
    } catch {
      return `no profile ${member.profile} on this gateway`;
    }
  }

  run(request: MemberTurnRequest, signal?: AbortSignal): Promise<MemberTurnResult> {
    const key = `${request.room_id}\n${request.turn_id}`;
    const running = this.running.get(key);
    if (running) return running;
    const known = this.remembered.get(key);
    if (known) return known.ok ? Promise.resolve(known.result) : Promise.reject(known.error);
    const turn = this.execute(request, signal).then(
      (result) => {
        this.remember(key, { ok: true, result });
        return result;
      },
      (err: unknown) => {
        const error = toHermesError(err);
        // A cancelled turn may be asked for again by a caller that is still there; anything else stands.
        if (!signal?.aborted) this.remember(key, { ok: false, error });
        throw error;
      },
    );
    this.running.set(key, turn);
    const forget = () => this.running.delete(key);
    turn.then(forget, forget);
    return turn;
  }

  private remember(key: string, outcome: Remembered): void {
    this.remembered.set(key, outcome);
    if (this.remembered.size > REMEMBERED_TURNS) this.remembered.delete(this.remembered.keys().next().value!);
  }

  private async execute(request: MemberTurnRequest, signal?: AbortSignal): Promise<MemberTurnResult> {
    let profile: string;
    try {
      profile = this.deps.profiles.resolve(request.member.profile);
    } catch (err) {
      const e = toHermesError(err);
      if (e.reason !== "not_found") throw e;
      const profiles = this.deps.profiles.names();
      throw new HermesError(
        "unknown_target",
        `member ${request.member.member_id} runs as profile ${request.member.profile}, which is not on this gateway (it has: ${profiles.join(", ")})`,
        { data: { member_id: request.member.member_id, profile: request.member.profile, profiles } },
      );
    }
    this.deps.profiles.assertIdentitySettled(profile);
    const session = this.deps.sessions.ensure(roomSessionOrigin(profile, request.room_id), "room", `Group: ${request.room_name}`);
    return this.deps.chat.exclusive(session.session_id, () => this.inSession(profile, session, request, signal));
  }

  private async inSession(
    profile: string,
    sessionRow: SessionRow,
    request: MemberTurnRequest,
    signal?: AbortSignal,
  ): Promise<MemberTurnResult> {
    signal?.throwIfAborted();
    const { chat } = this.deps;
    // Re-read: a /model command may have changed the row while the turn waited in the lane.
    const session = this.deps.sessions.store.byId(sessionRow.session_id) ?? sessionRow;
    const config = chat.modelConfig.forProfile(profile);
    const channel = findChannelOverride(config.platforms, { platform: "room", chat_id: request.room_id });
    const resolution = { session: sessionModelOverride(session), channel: channel?.override, global: config.global };
    const resolved = resolveModel(resolution);
    // The room prompt is part of the agent's own prompt: a change of members rebuilds the agent.
    const base = `${buildSystemPrompt(config.persona)}\n\n${roomTurnPrompt(request)}`;
    const agent = await chat.acquireAgent(
      { profile, session_id: session.session_id, config, resolved, system_prompt: base, tools: [] },
      signal,
    );
    let evict: false | { why: string; detail?: string } = false;
    try {
      const outcome = await agent.chain.complete({
        model: resolved.model,
        system_prompt: agent.system_prompt,
        messages: roomChatMessages(request),
        tools: [],
        turn_kind: "room",
        signal,
      });
      // No tools are offered in rooms: a model that asks for some anyway is answered by its text.
      const reply = outcome.result.kind === "text" ? outcome.result.text : (outcome.result.text ?? "");
      const served = { provider: outcome.served_by.provider, model: outcome.served_by.model };
      await this.record(profile, session.session_id, request, reply, served, outcome.fallback_active);
      const verdict = postTurnFallbackCheck({ ...served, fallback_active: outcome.fallback_active }, resolution);
      if (verdict.evict) evict = { why: verdict.why, detail: verdict.detail };
      return {
        turn_id: request.turn_id,
        reply,
        model: served.model,
        provider: served.provider,
        session_id: session.session_id,
        fallback_used: outcome.fallback_active,
      };
    } finally {
      chat.agents.release(session.session_id, evict);
    }
  }

  /** Stores the room messages this session has not stored yet, then the member's reply; resolves once they are on disk. */
  private async record(
    profile: string,
    sessionId: string,
    request: MemberTurnRequest,
    reply: string,
    served: { provider: string; model: string },
    fallback: boolean,
  ): Promise<void> {
    const db = this.deps.profileDbs.get(profile);
    const transcript = new TranscriptStore(db);
    let storedThrough = 0;
    for (const m of transcript.list(sessionId, 200)) {
      const seq = m.meta["room_seq"];
      if (typeof seq === "number" && seq > storedThrough) storedThrough = seq;
    }
    const now = isoTime(this.deps.clock.now());
    const rows: Omit<TranscriptMessage, "seq">[] = request.transcript
      .filter((m) => m.seq > storedThrough && !(m.author_kind === "member" && m.author_id === request.member.member_id))
      .map((m) => ({
        role: "user",
        content: m.text,
        meta: {
          room_id: request.room_id,
          room_seq: m.seq,
          room_event_id: m.event_id,
          author: m.author_kind === "user" ? "user" : m.author_id,
        },
        created_at: now,
      }));
    rows.push({
      role: "assistant",
      content: reply,
      meta: {
        room_id: request.room_id,
        room_seq: request.seen_through_seq,
        turn_id: request.turn_id,
        passed: isPass(reply),
        model: served.model,
        provider: served.provider,
        ...(fallback ? { fallback: true } : {}),
      },
      created_at: now,
    });
    transcript.append(sessionId, rows);
    await this.deps.profileDbs.durable(db);
  }
}

// ---------------------------------------------------------------------------------------------
// Serving turns to other gateways (gRPC RunMemberTurn, relay tunnel `groups.member_turn`)

export interface MemberTurnServerDeps {
  local: LocalMemberTurns;
  gatewayId: string;
  /** Self-fencing: a request names the room's authority and epoch. */
  observe(roomId: string, authority: Authority): void;
  logger: Logger;
}

/**
 * The member side of a remote turn (its request validated at the edge, rooms/api/member-turn.ts):
 * lets the room's claimed authority fence a stale local copy, refuses members that do not live
 * here, and runs the turn.
 */
export class MemberTurnServer {
  constructor(private readonly deps: MemberTurnServerDeps) {}

  async serve(request: MemberTurnRequest, context: { from: string; signal: AbortSignal }): Promise<MemberTurnResult> {
    this.deps.observe(request.room_id, request.authority);
    const home = request.member.gateway_id;
    if (home !== undefined && home !== this.deps.gatewayId) {
      throw new HermesError(
        "unknown_target",
        `member ${request.member.member_id} lives on gateway ${home}, not on ${this.deps.gatewayId}; the room's authority sent its turn to the wrong gateway`,
        { data: { member_id: request.member.member_id, gateway_id: home } },
      );
    }
    this.deps.logger.debug(
      { room_id: request.room_id, turn_id: request.turn_id, member_id: request.member.member_id, from: context.from },
      "member turn requested",
    );
    return this.deps.local.run(request, context.signal);
  }
}
