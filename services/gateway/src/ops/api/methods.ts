import { type Clock, HermesError, isoTime } from "@hermes/common";
import { RECEIPT_STATES } from "@hermes/contract";
import { z } from "zod";
import type { A2aStatus } from "../../a2a/app/a2a-status.js";
import type { ChatService } from "../../agents/app/chat.js";
import type { ConsoleSessions } from "../../console/api/console-sessions.js";
import type { DeliveryService } from "../../delivery/app/delivery-service.js";
import { receiptToWire } from "../../delivery/app/receipt-wire.js";
import { parseParams } from "../../rooms/api/methods.js";
import type { RoomsService } from "../../rooms/app/rooms-service.js";
import type { MeshObserver } from "../app/mesh-observer.js";
import { type CheckThresholds, DEFAULT_CHECK_THRESHOLDS, evaluateHealth, type HealthProbes } from "../core/health-check.js";
import { demoteCommand, promoteChecklist, promoteCoverageRefusal } from "../core/runbook.js";
import { diskSpace, probeFsyncMs } from "../store/disk-probe.js";

const limits = DEFAULT_CHECK_THRESHOLDS;
/** `mesh.check`'s thresholds: each one the caller leaves out takes the core's default. */
const checkThresholdsSchema = z.object({
  fsync_warning_ms: z.number().positive().default(limits.fsync_warning_ms),
  fsync_critical_ms: z.number().positive().default(limits.fsync_critical_ms),
  disk_warning_percent: z.number().min(0).max(100).default(limits.disk_warning_percent),
  disk_critical_percent: z.number().min(0).max(100).default(limits.disk_critical_percent),
  lag_warning_events: z.number().int().min(0).default(limits.lag_warning_events),
  lag_critical_events: z.number().int().min(0).default(limits.lag_critical_events),
  failures_warning: z.number().int().min(1).default(limits.failures_warning),
  failures_critical: z.number().int().min(1).default(limits.failures_critical),
  failures_window_seconds: z
    .number()
    .int()
    .min(1)
    .max(7 * 86_400)
    .default(limits.failures_window_seconds),
}) satisfies z.ZodType<CheckThresholds>;

/**
 * THE operations and console API: every method once, with its params (zod), the transports that
 * serve it and its call. The JSON-RPC methods at /rpc (the web console) and gRPC's
 * `OpsService.Call` (the CLI: `hermes status`, `hermes check`, login links) are generated from
 * this table, so a method answers the same objects wherever it is served.
 *
 * Transports: `rpc` (/rpc, with the key or a console session), `grpc` (OpsService on the TCP port
 * with the key and on the control socket), `control` (OpsService on the control socket only: no
 * key there, the socket's file mode is the guard).
 */

export type OpsTransport = "rpc" | "grpc" | "control";

/** A bot's display metadata (hidden, section), when the gateway has the Bot Mode metadata service. */
export interface BotMetadataSource {
  sections(): { id: string; name: string }[];
  profile(name: string): { hidden: boolean; section: string | null };
}

export interface OpsDeps {
  gatewayId: string;
  clock: Clock;
  version: string;
  /** HERMES_HOME, where the fsync probe writes. */
  home: string;
  mesh: MeshObserver;
  rooms: RoomsService;
  chat: ChatService;
  deliveries: DeliveryService;
  sessions: ConsoleSessions;
  /** Whether the gateway has an API key (without one the console needs no login). */
  keyRequired: boolean;
  /** `http://host:port/` of this gateway's console. */
  consoleUrl(): string;
  /** Every method /rpc serves, so the console shows what this gateway offers (Bot Mode's profiles.* when present). */
  rpcMethodNames(): string[];
  metadata?: BotMetadataSource | undefined;
  /** The cards served and the latest A2A tasks (a2a.status). */
  a2a?: ((limit: number) => A2aStatus) | undefined;
}

export interface OpsMethod<P = unknown> {
  name: string;
  transports: readonly OpsTransport[];
  params: z.ZodType<P>;
  call(deps: OpsDeps, params: P): unknown;
}

const method = <P>(m: OpsMethod<P>): OpsMethod<unknown> => m as OpsMethod<unknown>;

const profileName = z.string().min(1).max(64);
const roomId = z.string().min(1).max(128);

/** The probes `hermes check` grades: a durable write in the home, free space, deliveries that failed lately. */
function healthProbes(deps: OpsDeps, windowSeconds: number): HealthProbes {
  const probes: HealthProbes = {
    fsync_ms: null,
    fsync_error: null,
    disk_free_bytes: null,
    disk_total_bytes: null,
    disk_error: null,
    failed_deliveries: [],
    failures_window_seconds: windowSeconds,
  };
  try {
    probes.fsync_ms = probeFsyncMs(deps.home);
  } catch (err) {
    probes.fsync_error = (err as Error).message;
  }
  try {
    const space = diskSpace(deps.home);
    probes.disk_free_bytes = space.free_bytes;
    probes.disk_total_bytes = space.total_bytes;
  } catch (err) {
    probes.disk_error = (err as Error).message;
  }
  const since = deps.clock.now() - windowSeconds * 1000;
  probes.failed_deliveries = (["failed", "expired"] as const)
    .flatMap((state) => deps.deliveries.list({ state, limit: 1000 }))
    .map((d) => d.record)
    .filter((r) => Date.parse(r.settled_at ?? r.updated_at) >= since)
    .sort((a, b) => ((b.settled_at ?? b.updated_at) < (a.settled_at ?? a.updated_at) ? -1 : 1))
    .map((r) => ({ delivery_id: r.delivery_id, target: r.target, state: r.state, reason: r.reason, ended_at: r.settled_at }));
  return probes;
}

/** What the Runbook shows before a promote: the replica's coverage, the fencing checklist, and whether the CLI would refuse. */
function promotePlan(deps: OpsDeps, roomId: string) {
  const s = deps.rooms.replicaState(roomId);
  const coverage = { ...s, room_id: roomId };
  const refusal = promoteCoverageRefusal(coverage, false);
  return {
    room_id: roomId,
    gateway_id: deps.gatewayId,
    role: s.role,
    authority: s.authority,
    last_seq: s.last_seq,
    latest_seq: s.latest_seq,
    caught_up: s.caught_up,
    safety_status: s.safety_status,
    safety_reason: s.safety_reason,
    following: s.following,
    checklist: promoteChecklist(deps.gatewayId, coverage),
    /** Why a promote without allow_incomplete would be refused (the CLI's coverage check), or null. */
    coverage_refusal: refusal ? refusal.message : null,
  };
}

export const OPS_METHODS: readonly OpsMethod[] = [
  method({
    name: "console.session",
    transports: ["rpc"],
    params: z.object({}).loose(),
    call: (deps) => ({
      gateway_id: deps.gatewayId,
      version: deps.version,
      key_required: deps.keyRequired,
      methods: deps.rpcMethodNames(),
      metadata: deps.metadata !== undefined,
    }),
  }),
  method({
    name: "console.login_link",
    transports: ["control"],
    params: z.object({}).loose(),
    call: (deps) => {
      const link = deps.sessions.issueLoginLink();
      return { url: `${deps.consoleUrl()}login?token=${link.token}`, expires_at: link.expires_at };
    },
  }),
  method({
    name: "mesh.status",
    transports: ["rpc", "grpc"],
    params: z.object({ fresh: z.boolean().optional() }),
    call: (deps, p) => {
      if (p.fresh) deps.mesh.invalidate();
      return deps.mesh.status();
    },
  }),
  method({
    name: "mesh.check",
    transports: ["rpc", "grpc"],
    params: z.object({ thresholds: checkThresholdsSchema.partial().optional() }),
    call: async (deps, p) => {
      const thresholds = checkThresholdsSchema.parse(p.thresholds ?? {});
      if (thresholds.fsync_critical_ms < thresholds.fsync_warning_ms || thresholds.lag_critical_events < thresholds.lag_warning_events) {
        throw new HermesError("invalid_params", "thresholds: a critical limit must not be below its warning limit", {
          data: { field: "thresholds" },
        });
      }
      deps.mesh.invalidate();
      const status = await deps.mesh.status();
      return evaluateHealth(status, healthProbes(deps, thresholds.failures_window_seconds), thresholds, isoTime(deps.clock.now()));
    },
  }),
  method({
    name: "bots.roster",
    transports: ["rpc"],
    params: z.object({}).loose(),
    call: async (deps) => {
      const bots = await deps.mesh.bots();
      const meta = deps.metadata;
      return {
        gateway_id: deps.gatewayId,
        sections: meta ? meta.sections() : null,
        bots: bots.map((b) => ({ ...b, ...(meta && b.local ? meta.profile(b.handle) : { hidden: null, section: null }) })),
      };
    },
  }),
  method({
    name: "bots.chat",
    transports: ["rpc"],
    params: z.object({ profile: profileName, text: z.string() }),
    call: async (deps, p) => {
      const out = await deps.chat.turn({ profile: p.profile, text: p.text });
      return { profile: out.profile, reply: out.reply, model: out.model, provider: out.provider };
    },
  }),
  method({
    name: "bots.history",
    transports: ["rpc"],
    params: z.object({ profile: profileName, limit: z.number().int().min(1).max(200).optional() }),
    call: (deps, p) => ({
      profile: p.profile,
      messages: deps.chat
        .botChatHistory(p.profile, p.limit ?? 50)
        .filter((m) => m.role !== "tool")
        .map((m) => ({ seq: m.seq, role: m.role, content: m.content, created_at: m.created_at })),
    }),
  }),
  method({
    name: "a2a.status",
    transports: ["rpc", "grpc"],
    params: z.object({ limit: z.number().int().min(1).max(200).optional() }),
    call: (deps, p) => {
      if (!deps.a2a) throw new HermesError("method_not_found", "this gateway serves no A2A");
      return deps.a2a(p.limit ?? 20);
    },
  }),
  method({
    name: "deliveries.list",
    transports: ["rpc"],
    params: z.object({
      profile: profileName.optional(),
      state: z.enum(RECEIPT_STATES).optional(),
      side: z.enum(["outbox", "ingress"]).optional(),
      limit: z.number().int().min(1).max(1000).optional(),
    }),
    call: (deps, p) => ({
      deliveries: deps.deliveries
        .list({ profile: p.profile, state: p.state, limit: p.limit ?? 200 })
        .filter((d) => !p.side || d.side === p.side)
        .map((d) => ({ side: d.side, ...receiptToWire(d.record) })),
    }),
  }),
  method({
    name: "deliveries.get",
    transports: ["rpc"],
    params: z.object({ delivery_id: z.string().min(1).max(128) }),
    call: (deps, p) => receiptToWire(deps.deliveries.get(p.delivery_id)),
  }),
  method({
    name: "runbook.promote_plan",
    transports: ["rpc"],
    params: z.object({ room_id: roomId }),
    call: (deps, p) => promotePlan(deps, p.room_id),
  }),
  method({
    name: "runbook.promote",
    transports: ["rpc"],
    params: z.object({
      room_id: roomId,
      confirm: z.boolean().optional(),
      reason: z.string().max(200).optional(),
      allow_incomplete: z.boolean().optional(),
    }),
    call: async (deps, p) => {
      // The same checks, in the same order, as `hermes groups promote`: coverage here, confirm and the rest in the room service.
      const s = deps.rooms.replicaState(p.room_id);
      const refusal = promoteCoverageRefusal({ ...s, room_id: p.room_id }, p.allow_incomplete === true);
      if (refusal) throw refusal;
      const result = await deps.rooms.promote({ room_id: p.room_id, confirm: p.confirm === true, reason: p.reason });
      deps.mesh.invalidate();
      return {
        ...result,
        next: demoteCommand(p.room_id, { gateway_id: result.authority_gateway_id, epoch: result.authority_epoch }),
      };
    },
  }),
];

/** The methods a transport serves. */
export function opsMethodsFor(transport: OpsTransport): OpsMethod[] {
  return OPS_METHODS.filter((m) => m.transports.includes(transport));
}

/** Runs a method of the table on its params (unparsed: checked here, `invalid_params` naming the field). */
export function callOpsMethod(deps: OpsDeps, m: OpsMethod, raw: unknown): unknown {
  return m.call(deps, parseParams(m, raw));
}
