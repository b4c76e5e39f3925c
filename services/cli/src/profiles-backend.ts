import { envValue, HermesError, migrationMessage, systemClock } from "@hermes/common/client";
import {
  type AddRoutineRequest,
  BotModeServiceClient,
  type DeleteSectionReply,
  type RemoveRoutineReply,
  type Routine,
  type RoutineRun,
  type SectionInfo,
} from "@hermes/proto/hermes/v1/botmode";
import {
  ControlServiceClient,
  GatewayServiceClient,
  type IdentityMigration,
  type Profile,
  type RenameProfileReply,
} from "@hermes/proto/hermes/v1/gateway";
import type { CliContext } from "./context.js";

export interface CreateOptions {
  title?: string;
  description?: string;
  model?: string;
  provider?: string;
  clone_from?: string;
}

/**
 * Profile operations either through the live gateway (which owns the in-memory routing index) or,
 * when no gateway holds the store, directly on HERMES_HOME (services/gateway/src/identity/README.md).
 */
export interface ProfilesBackend {
  readonly live: boolean;
  list(): Promise<Profile[]>;
  show(name: string): Promise<Profile>;
  create(name: string, options: CreateOptions): Promise<Profile>;
  rename(oldName: string, newName: string): Promise<RenameProfileReply>;
  migrateIdentity(oldName: string, newName: string): Promise<IdentityMigration>;
  remove(name: string): Promise<{ name: string; purged: Record<string, number>; tombstone: string }>;
  /** Bot Mode metadata and title/description, as a JSON Merge Patch (`profiles.update`). */
  update(name: string, patch: Record<string, unknown>): Promise<Profile>;
  close(): void;
}

/** Sections and routines (BotModeService), through the live gateway or directly on HERMES_HOME. */
export interface BotModeBackend {
  readonly live: boolean;
  sections(): Promise<SectionInfo[]>;
  createSection(name: string, index: number | undefined): Promise<SectionInfo>;
  renameSection(section: string, name: string): Promise<SectionInfo>;
  moveSection(section: string, index: number): Promise<SectionInfo[]>;
  reorderSections(order: string[]): Promise<SectionInfo[]>;
  deleteSection(section: string): Promise<DeleteSectionReply>;
  addRoutine(request: AddRoutineRequest): Promise<Routine>;
  routines(profile: string): Promise<Routine[]>;
  pauseRoutine(job: string): Promise<Routine>;
  resumeRoutine(job: string): Promise<Routine>;
  removeRoutine(job: string): Promise<RemoveRoutineReply>;
  runRoutineNow(job: string): Promise<RoutineRun>;
  routineRuns(job: string, limit: number): Promise<RoutineRun[]>;
  close(): void;
}

function remoteBackend(ctx: CliContext): ProfilesBackend {
  const gw = ctx.client(GatewayServiceClient);
  return {
    live: true,
    list: async () => (await ctx.call(gw, gw.listProfiles, {})).profiles,
    show: (name) => ctx.call(gw, gw.getProfile, { name }),
    create: (name, o) =>
      ctx.call(gw, gw.createProfile, {
        name,
        title: o.title ?? "",
        description: o.description ?? "",
        model: o.model ?? "",
        provider: o.provider ?? "",
        clone_from: o.clone_from ?? "",
        soul: "",
      }),
    rename: (old_name, new_name) => ctx.call(gw, gw.renameProfile, { old_name, new_name }),
    migrateIdentity: (old_name, new_name) => {
      if (ctx.gatewayUrl) {
        throw new HermesError(
          "refused",
          "migrate-identity runs on the gateway's own host, over its control socket: drop --gateway and pass --home",
        );
      }
      const control = ctx.client(ControlServiceClient);
      return ctx.call(control, control.migrateProfileIdentity, { old_name, new_name });
    },
    remove: (name) => ctx.call(gw, gw.deleteProfile, { name }),
    update: (name, patch) => ctx.call(gw, gw.updateProfile, { name, patch_json: JSON.stringify(patch) }),
    close: () => ctx.close(),
  };
}

function remoteBotMode(ctx: CliContext): BotModeBackend {
  const bm = ctx.client(BotModeServiceClient);
  return {
    live: true,
    sections: async () => (await ctx.call(bm, bm.listSections, {})).sections,
    createSection: (name, index) => ctx.call(bm, bm.createSection, { name, index }),
    renameSection: (section, name) => ctx.call(bm, bm.renameSection, { section, name }),
    moveSection: async (section, index) => (await ctx.call(bm, bm.moveSection, { section, index })).sections,
    reorderSections: async (order) => (await ctx.call(bm, bm.reorderSections, { order })).sections,
    deleteSection: (section) => ctx.call(bm, bm.deleteSection, { section }),
    addRoutine: (request) => ctx.call(bm, bm.addRoutine, request),
    routines: async (profile) => (await ctx.call(bm, bm.listRoutines, { profile })).routines,
    pauseRoutine: (job) => ctx.call(bm, bm.pauseRoutine, { job }),
    resumeRoutine: (job) => ctx.call(bm, bm.resumeRoutine, { job }),
    removeRoutine: (job) => ctx.call(bm, bm.removeRoutine, { job }),
    runRoutineNow: (job) => ctx.call(bm, bm.runRoutineNow, { job }),
    routineRuns: async (job, limit) => (await ctx.call(bm, bm.listRoutineRuns, { job, limit })).runs,
    close: () => ctx.close(),
  };
}

/**
 * The services on HERMES_HOME itself, for when no gateway holds the store. Loaded only then, and
 * from the gateway package's `direct` entry, which leaves its daemon and transports unloaded.
 */
async function openDirect(ctx: CliContext) {
  const gateway = await import("@hermes/gateway/direct");
  const { busyTimeoutFromEnv, DEFAULT_DB_BUSY_TIMEOUT_MS, directRouting, openGatewayDb, ProfileDatabases, ProfileService, SessionService } =
    gateway;
  const busyTimeoutMs = busyTimeoutFromEnv(envValue(process.env, "HERMES_DB_BUSY_TIMEOUT_MS")) ?? DEFAULT_DB_BUSY_TIMEOUT_MS;
  ctx.home.ensureRoot();
  const db = openGatewayDb(ctx.home, busyTimeoutMs, (step) => process.stderr.write(`hermes: ${migrationMessage(step)}\n`));
  const profileDbs = new ProfileDatabases(ctx.home, db);
  const routing = directRouting(db);
  const sessions = new SessionService(db, routing, systemClock);
  const profiles = new ProfileService(ctx.home, db, profileDbs, sessions, routing, systemClock);
  profiles.ensureDefault();
  return {
    gateway,
    db,
    profiles,
    metadata: new gateway.BotMetadata(ctx.home, profiles),
    close: () => {
      profileDbs.closeAll();
      db.close();
    },
  };
}

const run = async <T>(fn: () => T): Promise<T> => fn();

async function directBackend(ctx: CliContext): Promise<ProfilesBackend> {
  const { gateway, profiles, metadata, close } = await openDirect(ctx);
  const { toWireProfile } = gateway;
  return {
    live: false,
    list: () => run(() => profiles.list().map(toWireProfile)),
    show: (name) => run(() => toWireProfile(profiles.show(name))),
    create: (name, o) => run(() => toWireProfile(profiles.create(name, o))),
    rename: (o, n) =>
      run(() => {
        const r = profiles.rename(o, n);
        return { ...r, profile: toWireProfile(r.profile) };
      }),
    migrateIdentity: (o, n) => run(() => profiles.migrateIdentity(o, n)),
    remove: (name) => run(() => profiles.delete(name)),
    update: (name, patch) => run(() => toWireProfile(metadata.update(name, patch))),
    close,
  };
}

/** Sections and routines edited in place; a routine added here is scheduled at the next gateway start. */
async function directBotMode(ctx: CliContext): Promise<BotModeBackend> {
  const { gateway, db, profiles, metadata, close } = await openDirect(ctx);
  const { toWireRoutine, toWireRun } = gateway;
  const routines = new gateway.RoutineService({
    store: new gateway.RoutinesStore(db),
    profiles,
    clock: systemClock,
    // Warnings only, on stderr: stdout is the command's output.
    logger: (await import("@hermes/common")).createLogger("hermes", "warn", process.stderr),
    timeZone: gateway.localTimeZone(),
  });
  return {
    live: false,
    sections: () => run(() => metadata.sections()),
    createSection: (name, index) => run(() => metadata.createSection(name, index)),
    renameSection: (section, name) => run(() => metadata.renameSection(section, name)),
    moveSection: (section, index) => run(() => metadata.moveSection(section, index)),
    reorderSections: (order) => run(() => metadata.reorderSections(order)),
    deleteSection: (section) => run(() => metadata.deleteSection(section)),
    addRoutine: (request) =>
      run(() => toWireRoutine(routines.add({ ...request, misfire: request.misfire || undefined, grace_seconds: request.grace_seconds }))),
    routines: (profile) => run(() => routines.list(profile).map(toWireRoutine)),
    pauseRoutine: (job) => run(() => toWireRoutine(routines.pause(job))),
    resumeRoutine: (job) => run(() => toWireRoutine(routines.resume(job))),
    removeRoutine: (job) => run(() => routines.remove(job)),
    runRoutineNow: (job) => run(() => toWireRun(routines.runNow(job))),
    routineRuns: (job, limit) => run(() => routines.runs(job, limit).map(toWireRun)),
    close,
  };
}

export async function profilesBackend(ctx: CliContext): Promise<ProfilesBackend> {
  return (await ctx.gatewayIsLive()) ? remoteBackend(ctx) : directBackend(ctx);
}

export async function botModeBackend(ctx: CliContext): Promise<BotModeBackend> {
  return (await ctx.gatewayIsLive()) ? remoteBotMode(ctx) : directBotMode(ctx);
}
