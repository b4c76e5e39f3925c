import { HermesError, systemClock } from "@hermes/common/client";
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
 * when no gateway holds the store, directly on HERMES_HOME (docs/ARCHITECTURE.md "Identity").
 */
export interface ProfilesBackend {
  readonly live: boolean;
  list(): Promise<Profile[]>;
  show(name: string): Promise<Profile>;
  create(name: string, options: CreateOptions): Promise<Profile>;
  rename(oldName: string, newName: string): Promise<RenameProfileReply>;
  migrateIdentity(oldName: string, newName: string): Promise<IdentityMigration>;
  remove(name: string): Promise<{ name: string; purged: Record<string, number>; tombstone: string }>;
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
    close: () => ctx.close(),
  };
}

/** Loaded only when no gateway holds the store: the gateway package is most of the CLI's start-up cost. */
async function directBackend(ctx: CliContext): Promise<ProfilesBackend> {
  const { directRouting, openGatewayDb, ProfileDatabases, ProfileService, SessionService } = await import("@hermes/gateway");
  ctx.home.ensureRoot();
  const db = openGatewayDb(ctx.home, Number(process.env.HERMES_DB_BUSY_TIMEOUT_MS ?? 5000));
  const profileDbs = new ProfileDatabases(ctx.home, db);
  const routing = directRouting(db);
  const sessions = new SessionService(db, routing, systemClock);
  const service = new ProfileService(ctx.home, db, profileDbs, sessions, routing, systemClock);
  service.ensureDefault();
  const run = async <T>(fn: () => T): Promise<T> => fn();
  return {
    live: false,
    list: () => run(() => service.list()),
    show: (name) => run(() => service.show(name)),
    create: (name, o) => run(() => service.create(name, o)),
    rename: (o, n) => run(() => service.rename(o, n)),
    migrateIdentity: (o, n) => run(() => service.migrateIdentity(o, n)),
    remove: (name) => run(() => service.delete(name)),
    close: () => {
      profileDbs.closeAll();
      db.close();
    },
  };
}

export async function profilesBackend(ctx: CliContext): Promise<ProfilesBackend> {
  return (await ctx.gatewayIsLive()) ? remoteBackend(ctx) : directBackend(ctx);
}
