import type { BotModeServiceServer } from "@hermes/proto/hermes/v1/botmode";
import type { GatewayServiceServer } from "@hermes/proto/hermes/v1/gateway";
import { z } from "zod";
import { type MethodTable, unaryMethod } from "../../api/methods/unary-table.js";
import type { ProfileService } from "../../identity/app/profiles.js";
import type { RoutineService } from "../../routines/app/routine-service.js";
import type { BotMetadata } from "../app/bot-metadata.js";
import { patchFromJson, toWireProfile, toWireRoutine, toWireRun } from "./wire.js";

/**
 * THE Bot Mode API: `profiles.*` (GatewayService's profile reads and UpdateProfile), `sections.*`
 * and `routines.*` (BotModeService), each method once; the gRPC handlers and the JSON-RPC methods are
 * derived from these tables (api/methods/unary-table.ts). Values are checked by the core (names,
 * schedules, zones, prompts, metadata), so both transports refuse the same input the same way.
 */
export interface BotModeApi {
  profiles: ProfileService;
  metadata: BotMetadata;
  routines: RoutineService;
}

const identity = <T>(value: T): T => value;
const profileMethod = unaryMethod<BotModeApi, GatewayServiceServer>();
const botModeMethod = unaryMethod<BotModeApi, BotModeServiceServer>();
/** A routine named `[bot:<profile>] <name>`, checked by the core (a wrong type is refused there, naming the format). */
const job = z.object({ job: z.unknown() });

export const PROFILE_METHODS: MethodTable<BotModeApi, GatewayServiceServer> = [
  profileMethod({
    name: "profiles.list",
    params: z.object({}).loose(),
    call: (api) => api.profiles.list(),
    json: (profiles) => ({ profiles }),
    grpc: { method: "listProfiles", request: () => ({}), reply: (profiles) => ({ profiles: profiles.map(toWireProfile) }) },
  }),
  profileMethod({
    name: "profiles.get",
    params: z.object({ name: z.string() }),
    call: (api, p) => api.profiles.show(p.name),
    json: identity,
    grpc: { method: "getProfile", request: identity, reply: toWireProfile },
  }),
  profileMethod({
    name: "profiles.update",
    params: z.object({ name: z.string(), patch: z.unknown() }),
    call: (api, p) => api.metadata.update(p.name, p.patch),
    json: identity,
    grpc: { method: "updateProfile", request: (req) => ({ name: req.name, patch: patchFromJson(req.patch_json) }), reply: toWireProfile },
  }),
];

const sectionList = <T>(sections: T[]) => ({ sections });

export const BOTMODE_METHODS: MethodTable<BotModeApi, BotModeServiceServer> = [
  botModeMethod({
    name: "sections.list",
    params: z.object({}).loose(),
    call: (api) => api.metadata.sections(),
    json: sectionList,
    grpc: { method: "listSections", request: () => ({}), reply: sectionList },
  }),
  botModeMethod({
    name: "sections.create",
    params: z.object({ name: z.unknown(), index: z.unknown().optional() }),
    call: (api, p) => api.metadata.createSection(p.name, p.index),
    json: identity,
    grpc: { method: "createSection", request: identity, reply: identity },
  }),
  botModeMethod({
    name: "sections.rename",
    params: z.object({ section: z.string(), name: z.unknown() }),
    call: (api, p) => api.metadata.renameSection(p.section, p.name),
    json: identity,
    grpc: { method: "renameSection", request: identity, reply: identity },
  }),
  botModeMethod({
    name: "sections.move",
    params: z.object({ section: z.string(), index: z.unknown() }),
    call: (api, p) => api.metadata.moveSection(p.section, p.index),
    json: sectionList,
    grpc: { method: "moveSection", request: identity, reply: sectionList },
  }),
  botModeMethod({
    name: "sections.reorder",
    params: z.object({ order: z.unknown() }),
    call: (api, p) => api.metadata.reorderSections(p.order),
    json: sectionList,
    grpc: { method: "reorderSections", request: identity, reply: sectionList },
  }),
  botModeMethod({
    name: "sections.delete",
    params: z.object({ section: z.string() }),
    call: (api, p) => api.metadata.deleteSection(p.section),
    json: identity,
    grpc: { method: "deleteSection", request: identity, reply: identity },
  }),
  botModeMethod({
    name: "routines.add",
    params: z.object({
      profile: z.string(),
      name: z.unknown(),
      schedule: z.unknown(),
      tz: z.unknown().optional(),
      prompt: z.unknown(),
      misfire: z.unknown().optional(),
      grace_seconds: z.unknown().optional(),
    }),
    call: (api, p) => api.routines.add(p),
    json: identity,
    grpc: {
      method: "addRoutine",
      // Unset fields are left out: their defaults apply (the gateway's zone, skip, 300 s).
      request: (req) => ({ ...req, misfire: req.misfire || undefined }),
      reply: toWireRoutine,
    },
  }),
  botModeMethod({
    name: "routines.list",
    params: z.object({ profile: z.string().optional() }),
    call: (api, p) => api.routines.list(p.profile),
    json: (routines) => ({ routines }),
    grpc: { method: "listRoutines", request: identity, reply: (routines) => ({ routines: routines.map(toWireRoutine) }) },
  }),
  botModeMethod({
    name: "routines.pause",
    params: job,
    call: (api, p) => api.routines.pause(p.job),
    json: identity,
    grpc: { method: "pauseRoutine", request: identity, reply: toWireRoutine },
  }),
  botModeMethod({
    name: "routines.resume",
    params: job,
    call: (api, p) => api.routines.resume(p.job),
    json: identity,
    grpc: { method: "resumeRoutine", request: identity, reply: toWireRoutine },
  }),
  botModeMethod({
    name: "routines.remove",
    params: job,
    call: (api, p) => api.routines.remove(p.job),
    json: identity,
    grpc: { method: "removeRoutine", request: identity, reply: identity },
  }),
  botModeMethod({
    name: "routines.run_now",
    params: job,
    call: (api, p) => api.routines.runNow(p.job),
    json: identity,
    grpc: { method: "runRoutineNow", request: identity, reply: toWireRun },
  }),
  botModeMethod({
    name: "routines.runs",
    params: z.object({ job: z.unknown(), limit: z.unknown().optional() }),
    call: (api, p) => api.routines.runs(p.job, p.limit),
    json: (runs) => ({ runs }),
    grpc: { method: "listRoutineRuns", request: identity, reply: (runs) => ({ runs: runs.map(toWireRun) }) },
  }),
];
