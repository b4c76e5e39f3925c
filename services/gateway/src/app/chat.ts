import { type Clock, type Db, HermesError, isoTime, type Logger, newId } from "@hermes/common";
import PQueue from "p-queue";
import type { ProfileDatabases } from "../store/gateway-store.js";
import type { SessionRow } from "../store/sessions-store.js";
import { type TranscriptMessage, TranscriptStore } from "../store/sessions-store.js";
import type { HermesHome } from "./home.js";
import type { ProfileService } from "./profiles.js";
import type { SessionService } from "./sessions.js";

export interface TurnInput {
  profile: string;
  text: string;
  session_id?: string | undefined;
  signal?: AbortSignal;
}

export interface TurnOutput {
  profile: string;
  session_id: string;
  reply: string;
  model: string;
  provider: string;
  fallback_used: boolean;
}

export interface ChatDeps {
  home: HermesHome;
  db: Db;
  profileDbs: ProfileDatabases;
  profiles: ProfileService;
  sessions: SessionService;
  clock: Clock;
  logger: Logger;
  gatewayId: string;
}

const MAX_TURN_TEXT = 64 * 1024;

/**
 * Chat turns: one at a time per session (a second turn queues behind the running one), transcript
 * in the profile's own state.db, and a delivery obligation that is pending while the reply is owed,
 * so a crash mid-turn is visible after restart instead of silently lost.
 */
export class ChatService {
  private readonly lanes = new Map<string, PQueue>();

  constructor(private readonly deps: ChatDeps) {}

  private lane(sessionId: string): PQueue {
    let lane = this.lanes.get(sessionId);
    if (!lane) {
      lane = new PQueue({ concurrency: 1 });
      lane.on("idle", () => {
        if (lane!.size === 0 && lane!.pending === 0) this.lanes.delete(sessionId);
      });
      this.lanes.set(sessionId, lane);
    }
    return lane;
  }

  private session(profile: string, sessionId: string | undefined): SessionRow {
    if (!sessionId) return this.deps.sessions.botChat(profile);
    const session = this.deps.sessions.store.byId(sessionId);
    if (!session || session.profile_name !== profile) {
      throw new HermesError("not_found", `session ${sessionId} does not belong to profile ${profile}`);
    }
    return session;
  }

  async turn(input: TurnInput): Promise<TurnOutput> {
    if (typeof input.text !== "string" || input.text.length === 0)
      throw new HermesError("invalid_params", "a chat turn needs text (-q TEXT)");
    if (input.text.length > MAX_TURN_TEXT) {
      throw new HermesError("payload_too_large", `text is ${input.text.length} characters; the limit is ${MAX_TURN_TEXT}`, {
        data: { limit: MAX_TURN_TEXT },
      });
    }
    const profile = this.deps.profiles.resolve(input.profile);
    const session = this.session(profile, input.session_id);
    return this.lane(session.session_id).add(() => this.runTurn(profile, session, input.text));
  }

  private async runTurn(profile: string, session: SessionRow, text: string): Promise<TurnOutput> {
    const { db, clock } = this.deps;
    const transcript = new TranscriptStore(this.deps.profileDbs.get(profile));
    const obligationId = newId("obl");
    const now = () => isoTime(clock.now());
    db.prepare(
      `INSERT INTO delivery_obligations (obligation_id, adapter_profile, session_key, kind, state, payload_json, created_at, updated_at)
       VALUES (?, ?, ?, 'turn_reply', 'pending', ?, ?, ?)`,
    ).run(obligationId, profile, session.session_key, JSON.stringify({ session_id: session.session_id }), now(), now());
    const settle = (state: "delivered" | "failed") =>
      db.prepare("UPDATE delivery_obligations SET state = ?, updated_at = ? WHERE obligation_id = ?").run(state, now(), obligationId);
    try {
      const history = transcript.list(session.session_id);
      const result = this.respond(profile, history, text);
      transcript.append(session.session_id, [
        { role: "user", content: text, meta: {}, created_at: now() },
        { role: "assistant", content: result.reply, meta: { model: result.model, provider: result.provider }, created_at: now() },
      ]);
      this.deps.sessions.touch(session);
      settle("delivered");
      return { profile, session_id: session.session_id, ...result };
    } catch (err) {
      settle("failed");
      throw err;
    }
  }

  private respond(profile: string, _history: TranscriptMessage[], text: string): Omit<TurnOutput, "profile" | "session_id"> {
    const info = this.deps.profiles.show(profile);
    return { reply: `${info.display_name}: ${text}`, model: info.model, provider: info.provider, fallback_used: false };
  }

  /** Turns that were running when the process died: their obligations are marked failed, never re-run. */
  recoverInterruptedTurns(): number {
    return this.deps.db
      .prepare("UPDATE delivery_obligations SET state = 'failed', updated_at = ? WHERE kind = 'turn_reply' AND state = 'pending'")
      .run(isoTime(this.deps.clock.now())).changes;
  }

  /** Stops queued turns of a profile (before delete): queued ones are dropped, a running one finishes. */
  stopProfile(profile: string): void {
    for (const session of this.deps.sessions.store.listByProfile(profile)) this.lanes.get(session.session_id)?.clear();
  }

  async stop(): Promise<void> {
    await Promise.all([...this.lanes.values()].map((l) => l.onIdle()));
  }
}
