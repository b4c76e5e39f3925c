import { HermesError, type ServiceHandlers } from "@hermes/common";
import type { PeerServiceServer, Run as WireRun } from "@hermes/proto/hermes/v1/peers";
import type { PeerRuns } from "../app/peer-runs.js";
import type { RunRecord } from "../core/run.js";
import { parseRunRequest, type RawRunRequest } from "../core/run-request.js";

/** How long Dm waits for the turn when the caller does not say (upstream `peer.dm_wait_seconds`). */
export const DEFAULT_DM_WAIT_SECONDS = 600;
/** The longest wait a single call may ask for; beyond it, poll GetRun. */
export const MAX_WAIT_SECONDS = 3600;

/** A run → wire form: null fields left unset (optional in the proto). */
export function wireRun(r: RunRecord): WireRun {
  return {
    run_id: r.run_id,
    status: r.status,
    kind: r.kind,
    profile: r.profile,
    session_id: r.session_id,
    from: `${r.sender_profile}@${r.sender_gateway}`,
    ...(r.idempotency_key !== null ? { idempotency_key: r.idempotency_key } : {}),
    ...(r.reply !== null ? { reply: r.reply } : {}),
    ...(r.reason !== null ? { reason: r.reason } : {}),
    ...(r.error !== null ? { error: r.error } : {}),
    created_at: r.created_at,
    ...(r.started_at !== null ? { started_at: r.started_at } : {}),
    ...(r.ended_at !== null ? { ended_at: r.ended_at } : {}),
  };
}

function waitMs(seconds: number, fallbackSeconds: number): number {
  if (seconds > MAX_WAIT_SECONDS) {
    throw new HermesError(
      "invalid_params",
      `wait_seconds is ${seconds}; the most one call waits is ${MAX_WAIT_SECONDS} (poll GetRun for longer runs)`,
    );
  }
  return (seconds || fallbackSeconds) * 1000;
}

function requireRunId(runId: string): string {
  if (!runId) throw new HermesError("invalid_params", "a run id is required (the one `hermes peer run` printed)");
  if (runId.length > 128) throw new HermesError("invalid_params", "that is not a run id (too long)");
  return runId;
}

export interface PeerHandlerDeps {
  runs: PeerRuns;
  /**
   * Whether this server requires the API key. Peer turns are only served where it does: a gateway
   * without a key must not run turns for whoever can reach its port.
   */
  keyRequired: boolean;
  transport: "tcp" | "control";
}

/** PeerService over gRPC: validation at the edge here, behaviour in peers/app. */
export function peerServiceHandlers(deps: PeerHandlerDeps): ServiceHandlers<PeerServiceServer> {
  const { runs } = deps;
  const guard = () => {
    if (deps.transport === "tcp" && !deps.keyRequired) {
      throw new HermesError(
        "unauthenticated",
        "this gateway has no API key, so it does not run turns for peers: set API_SERVER_KEY (or gateway.api_key) and give that key to the peer (hermes peer add NAME --url … --key KEY)",
      );
    }
  };
  const request = (req: RawRunRequest) =>
    parseRunRequest({
      profile: req.profile,
      input: req.input,
      sender_profile: req.sender_profile,
      sender_gateway: req.sender_gateway,
      sender_name: req.sender_name,
      idempotency_key: req.idempotency_key,
    });
  return {
    dm: async (req, ctx) => {
      guard();
      const ms = waitMs(req.wait_seconds, DEFAULT_DM_WAIT_SECONDS);
      const { run, replayed } = runs.submit("dm", request(req));
      // A caller that goes away stops waiting; the run itself goes on (poll it with GetRun).
      const ended = await runs.wait(run.run_id, ms, ctx.signal);
      return { run: wireRun(ended), replayed };
    },
    startRun: (req) => {
      guard();
      const { run, replayed } = runs.submit("run", request(req));
      return { run: wireRun(run), replayed };
    },
    getRun: async (req, ctx) => {
      guard();
      const id = requireRunId(req.run_id);
      return wireRun(await runs.wait(id, req.wait_seconds ? waitMs(req.wait_seconds, 0) : 0, ctx.signal));
    },
    stopRun: async (req) => {
      guard();
      return wireRun(await runs.stopRun(requireRunId(req.run_id)));
    },
  };
}
