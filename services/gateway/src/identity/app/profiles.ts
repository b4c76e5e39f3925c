import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { type Clock, type Db, databaseError, HermesError, isoTime, readYamlFile, toHermesError } from "@hermes/common";
import { assertProfileName, DEFAULT_PROFILE } from "@hermes/contract";
import { stringify as toYaml } from "yaml";
import { clonedLook, metaAfterRename, type ProfileMetaView, profileMetaView } from "../../botmode/core/profile-meta.js";
import type { Section } from "../../botmode/core/sections.js";
import {
  metaOf,
  patchProfileMetaFile,
  readProfileMetaFile,
  sectionsForDisplay,
  writeProfileMeta,
} from "../../botmode/store/botmode-files.js";
import { loadGatewayConfigFile, loadProfileConfig } from "../../home/app/config.js";
import { Events } from "../../home/app/events.js";
import type { ProfileDatabases } from "../../home/store/gateway-store.js";
import type { HermesHome } from "../../home/store/home.js";
import { botChatOrigin, routingKey } from "../core/routing-key.js";
import { purgeProfileState, rekeyProfileState, type TableCounts } from "../store/identity-store.js";
import { aliasesOf, aliasTarget, dropAlias, recordAlias } from "../store/profiles-store.js";
import type { RoutingAccess, SessionService } from "./sessions.js";

export interface ProfileInfo {
  name: string;
  display_name: string;
  title: string;
  description: string;
  model: string;
  provider: string;
  path: string;
  aliases: string[];
  bot_chat_session_id: string;
  is_default: boolean;
  /** Bot Mode metadata (profile.yaml): hidden, section, avatar, ui_meta, and problems of the file. */
  meta: ProfileMetaInfo;
}

/** The metadata view, with the name of the bot's section for display. */
export interface ProfileMetaInfo extends ProfileMetaView {
  section_name: string | null;
}

export interface CreateProfileOptions {
  title?: string;
  description?: string;
  model?: string;
  provider?: string;
  clone_from?: string;
  soul?: string;
}

export interface IdentityMigrationResult {
  ok: boolean;
  counts: TableCounts;
  routing_in_memory: number;
  error: string;
  database: string;
}

export interface RenameResult {
  profile: ProfileInfo;
  display_name_only: boolean;
  migration: IdentityMigrationResult | undefined;
  warning: string;
}

/** What changed in the set of profiles or how one is shown (rosters and the relay announce are rebuilt). */
export type ProfileChange = { kind: "created" | "deleted" | "relabelled"; name: string } | { kind: "renamed"; name: string; from: string };

/** Profile lifecycle events, for the live parts of a running gateway (lanes, turns, rosters). */
export interface ProfileEventMap {
  /**
   * Before the profile is deleted: end every open delivery sent by or to it (typed, senders told)
   * and stop every turn running or queued for it.
   */
  stopping: [name: string];
  /** The profile's folder moved and its identity was migrated: what is keyed by the old name follows. */
  renamed: [oldName: string, newName: string];
  /** Created, renamed, relabelled or deleted (after the change is complete). */
  changed: [change: ProfileChange];
}

/** Left in a renamed profile's folder while its identity migration is unfinished; holds the old name. */
const PENDING_MIGRATION_FILE = ".identity-migration-pending";
/** Files copied by --clone-from: configuration and persona; never sessions or transcripts. */
const CLONED_FILES = ["config.yaml", "SOUL.md", ".env"];

/**
 * Profiles: list/show/create/rename/delete and identity migration. Used by a live gateway
 * (with its in-memory routing index as RoutingAccess) and by the CLI when no gateway holds the store.
 */
export class ProfileService {
  constructor(
    private readonly home: HermesHome,
    private readonly db: Db,
    private readonly profileDbs: ProfileDatabases,
    private readonly sessions: SessionService,
    private readonly routing: RoutingAccess,
    private readonly clock: Clock,
  ) {}

  /** Lifecycle events; services of a running gateway subscribe when they are built. */
  readonly events = new Events<ProfileEventMap>();

  /** The default profile (HERMES_HOME itself) exists from the start, and so does its Bot Chat. */
  ensureDefault(): void {
    this.sessions.botChat(DEFAULT_PROFILE);
    this.routing.flush();
  }

  /** Names of live named profiles (directories with a marker and no tombstone), sorted. */
  names(): string[] {
    if (!existsSync(this.home.profilesDir)) return [DEFAULT_PROFILE];
    const named = readdirSync(this.home.profilesDir)
      .filter((n) => !n.startsWith(".") && this.home.isLiveProfile(n))
      .sort();
    return [DEFAULT_PROFILE, ...named];
  }

  list(): ProfileInfo[] {
    const { sections } = sectionsForDisplay(this.home);
    return this.names().map((n) => this.info(n, sections));
  }

  /**
   * The canonical name for a name or a former name (alias). Unknown names are not_found with a
   * hint; invalid ones are invalid_name with the rule.
   */
  resolve(nameOrAlias: string): string {
    if (nameOrAlias === DEFAULT_PROFILE) return DEFAULT_PROFILE;
    assertProfileName(nameOrAlias);
    if (this.home.isLiveProfile(nameOrAlias)) return nameOrAlias;
    const aliased = aliasTarget(this.db, nameOrAlias);
    if (aliased && this.home.isLiveProfile(aliased)) return aliased;
    const deleted = this.home.isTombstoned(nameOrAlias) ? " (it was deleted)" : "";
    throw new HermesError("not_found", `unknown profile ${nameOrAlias}${deleted}; list profiles with: hermes profile list`, {
      data: { profile: nameOrAlias, profiles: this.names() },
    });
  }

  show(nameOrAlias: string): ProfileInfo {
    return this.info(this.resolve(nameOrAlias));
  }

  private metaInfo(name: string, sections: readonly Section[]): ProfileMetaInfo {
    const view = profileMetaView(
      metaOf(readProfileMetaFile(this.home, name)),
      name,
      sections.map((s) => s.id),
    );
    return { ...view, section_name: sections.find((s) => s.id === view.section)?.name ?? null };
  }

  private info(name: string, sections = sectionsForDisplay(this.home).sections): ProfileInfo {
    const own = loadProfileConfig(this.home, name);
    const meta = this.metaInfo(name, sections);
    const global = name === DEFAULT_PROFILE ? own : loadGatewayConfigFile(this.home);
    const aliases = aliasesOf(this.db, name);
    return {
      name,
      display_name: meta.display_name,
      title: own.title ?? "",
      description: own.description ?? "",
      model: own.model ?? global.model ?? "local",
      provider: own.provider ?? global.provider ?? "local",
      path: this.home.profileDir(name),
      aliases,
      // Looked up, never created here: creating it for a half-migrated name would collide later.
      bot_chat_session_id: this.sessions.store.byKey(routingKey(botChatOrigin(name)))?.session_id ?? "",
      is_default: name === DEFAULT_PROFILE,
      meta,
    };
  }

  create(name: string, options: CreateProfileOptions = {}): ProfileInfo {
    assertProfileName(name);
    if (name === DEFAULT_PROFILE) throw new HermesError("default_profile", "the default profile always exists (it is HERMES_HOME itself)");
    if (this.home.isLiveProfile(name) || (this.occupied(name) && !this.home.isTombstoned(name))) {
      throw new HermesError(
        "already_exists",
        `profile ${name} already exists; pick another name or delete it first (hermes profile delete ${name})`,
        {
          data: { profile: name },
        },
      );
    }
    const source = options.clone_from === undefined ? undefined : this.resolve(options.clone_from);
    const wasDeleted = this.home.isTombstoned(name);
    // Assembled in a hidden staging folder and renamed into place: a create that fails half-way
    // (a full disk) leaves the name as it was, never an empty profiles/<name>/.
    const staged = this.home.stageProfileDir(name);
    let dir: string;
    try {
      this.writeProfileFiles(staged, source, options);
      // A former name forwarded to its renamed database becomes a name of its own again.
      this.profileDbs.forget(name);
      dir = this.home.publishProfileDir(staged, name);
    } catch (err) {
      rmSync(staged, { recursive: true, force: true });
      throw err;
    }
    try {
      loadProfileConfig(this.home, name); // validates what was cloned or given
      this.profileDbs.get(name);
      this.db
        .transaction(() => {
          // A profile created explicitly under a former name takes the name back from the alias.
          dropAlias(this.db, name);
          this.sessions.botChat(name);
        })
        .immediate();
      this.routing.flush();
    } catch (err) {
      this.unpublish(name, dir, wasDeleted);
      throw err;
    }
    this.events.emit("changed", { kind: "created", name });
    return this.info(name);
  }

  /** Something is at profiles/<name> (an empty folder an older failed create left counts as nothing). */
  private occupied(name: string): boolean {
    const dir = this.home.profileDir(name);
    return existsSync(dir) && (!statSync(dir).isDirectory() || readdirSync(dir).length > 0);
  }

  /** config.yaml (cloned and/or given), profile.yaml, SOUL.md and .env of a new profile, into `dir`. */
  private writeProfileFiles(dir: string, source: string | undefined, options: CreateProfileOptions): void {
    if (source !== undefined) {
      for (const file of CLONED_FILES) {
        const from = join(this.home.profileDir(source), file);
        // Written, not copied: the copy is private (0600) whatever the source's mode, .env above all.
        if (existsSync(from)) this.home.writeFile(join(dir, file), readFileSync(from));
      }
    }
    const base = source === undefined ? {} : (readYamlFile(join(dir, "config.yaml")) as Record<string, unknown>);
    const config = {
      ...base,
      ...(options.title !== undefined ? { title: options.title } : {}),
      ...(options.description !== undefined ? { description: options.description } : {}),
      ...(options.model !== undefined ? { model: options.model } : {}),
      ...(options.provider !== undefined ? { provider: options.provider } : {}),
    };
    this.home.writeFile(join(dir, "config.yaml"), toYaml(config));
    // A duplicate (--clone-from) has its source's look: face and section (profile-meta.ts, clonedLook).
    const look = source === undefined ? {} : clonedLook(readProfileMetaFile(this.home, source).raw, source);
    this.home.writeFile(join(dir, "profile.yaml"), toYaml({ created_at: isoTime(this.clock.now()), ...look }));
    if (options.soul !== undefined) this.home.writeFile(join(dir, "SOUL.md"), options.soul);
    if (!existsSync(join(dir, ".env"))) this.home.writeFile(join(dir, ".env"), "", 0o600);
  }

  /** Undoes a published create that could not finish: the name is absent (or deleted) again, as before. */
  private unpublish(name: string, dir: string, wasDeleted: boolean): void {
    this.profileDbs.forget(name);
    this.routing.removeProfile(name);
    rmSync(dir, { recursive: true, force: true });
    if (!wasDeleted) return;
    try {
      this.home.writeTombstone(name);
    } catch {
      // No room even for the tombstone: the name is simply absent, which is as unusable.
    }
  }

  /**
   * Rekeys identity old → new: the live index's collisions are checked first, then the DB moves
   * in one transaction (the profile's id renamed, the name columns rewritten, `old` recorded as an
   * alias), then the live index is rekeyed and persisted. `new` must exist; `old` need not. A
   * second run is a no-op.
   */
  migrateIdentity(oldName: string, newName: string): IdentityMigrationResult {
    assertProfileName(oldName, "old profile name");
    assertProfileName(newName, "new profile name");
    if (!this.home.isLiveProfile(newName)) {
      throw new HermesError("not_found", `profile ${newName} does not exist; migrate-identity moves rows onto an existing profile`, {
        data: { profile: newName },
      });
    }
    const clash = this.routing.collisions(oldName, newName);
    if (clash.length > 0) {
      throw new HermesError("identity_collision", `profile routing collision in the live routing index: ${clash[0]} already exists`, {
        data: { database: "live gateway routing index", key: clash[0] },
      });
    }
    let counts: TableCounts;
    try {
      counts = this.db
        .transaction(() => {
          const c = rekeyProfileState(this.db, oldName, newName);
          recordAlias(this.db, oldName, newName, isoTime(this.clock.now()));
          return c;
        })
        .immediate();
    } catch (err) {
      const e = databaseError(err, "gateway state.db", this.home.stateDb);
      e.data.database ??= this.home.stateDb;
      throw e;
    }
    const moved = this.routing.rekeyProfile(oldName, newName);
    this.routing.flush();
    rmSync(this.pendingMarker(newName), { force: true });
    return { ok: true, counts, routing_in_memory: moved, error: "", database: "" };
  }

  private pendingMarker(name: string): string {
    return join(this.home.profileDir(name), PENDING_MIGRATION_FILE);
  }

  /**
   * Refuses work that would create identity rows under a name whose migration is unfinished
   * (a rename whose rekey failed): the retry would then collide with them.
   */
  assertIdentitySettled(name: string): void {
    const marker = this.pendingMarker(name);
    if (!existsSync(marker)) return;
    const oldName = readFileSync(marker, "utf8").trim();
    throw new HermesError(
      "refused",
      `profile ${name} has an unfinished identity migration from ${oldName}; run: hermes profile migrate-identity ${oldName} ${name} (restart or stop the gateway first if it keeps failing)`,
      { data: { profile: name, old_name: oldName } },
    );
  }

  rename(oldName: string, newName: string): RenameResult {
    if (oldName === DEFAULT_PROFILE) return this.setDefaultDisplayName(newName);
    assertProfileName(oldName, "old profile name");
    assertProfileName(newName, "new profile name");
    if (newName === DEFAULT_PROFILE)
      throw new HermesError("default_profile", "cannot rename a profile to default: that id is HERMES_HOME itself");
    if (!this.home.isLiveProfile(oldName)) this.resolve(oldName); // throws not_found with the hint
    if (this.home.isLiveProfile(newName) || (existsSync(this.home.profileDir(newName)) && !this.home.isTombstoned(newName))) {
      throw new HermesError("already_exists", `profile ${newName} already exists; nothing was changed`, { data: { profile: newName } });
    }
    // Turns running under the old name are not stopped: they are bound to their session, and
    // write through the forwarded handle into the moved folder (identity/README.md, "A rename").
    this.profileDbs.renamed(oldName, newName);
    if (this.home.isTombstoned(newName)) rmSync(this.home.profileDir(newName), { recursive: true, force: true });
    rmSync(this.home.tombstonePath(newName), { force: true });
    renameSync(this.home.profileDir(oldName), this.home.profileDir(newName));
    this.keepFaceAfterRename(oldName, newName);
    let migration: IdentityMigrationResult;
    let warning = "";
    try {
      migration = this.migrateIdentity(oldName, newName);
    } catch (err) {
      const e = toHermesError(err);
      const database = typeof e.data.database === "string" ? e.data.database : this.home.stateDb;
      migration = { ok: false, counts: {}, routing_in_memory: 0, error: e.message, database };
      warning =
        `profile was renamed, but identity migration failed in ${database}: ${e.message}\n` +
        `restart the gateway (or stop it), then run:\n  hermes profile migrate-identity ${oldName} ${newName}`;
      // Until the retry succeeds, turns under the new name are refused: a fresh Bot Chat created now
      // would collide with the old one and make the retry impossible.
      this.home.writeFile(this.pendingMarker(newName), `${oldName}\n`);
    }
    if (migration.ok) this.events.emit("renamed", oldName, newName);
    this.events.emit("changed", { kind: "renamed", name: newName, from: oldName });
    return { profile: this.info(newName), display_name_only: false, migration, warning };
  }

  /**
   * The metadata moved with the folder. A locked face that was never pinned (a hand-edited file)
   * is pinned to the old name so it stays the same face; a file that cannot be read is left alone.
   */
  private keepFaceAfterRename(oldName: string, newName: string): void {
    const file = readProfileMetaFile(this.home, newName);
    if (file.unreadable !== undefined) return;
    const kept = metaAfterRename(file.raw, oldName);
    if (kept !== file.raw) writeProfileMeta(this.home, newName, kept);
  }

  /** `rename default <label>`: only the display name changes; the id stays `default` everywhere. */
  private setDefaultDisplayName(label: string): RenameResult {
    const { sections } = sectionsForDisplay(this.home);
    patchProfileMetaFile(
      this.home,
      DEFAULT_PROFILE,
      { display_name: label },
      sections.map((s) => s.id),
    );
    this.events.emit("changed", { kind: "relabelled", name: DEFAULT_PROFILE });
    return { profile: this.info(DEFAULT_PROFILE), display_name_only: true, migration: undefined, warning: "" };
  }

  delete(nameOrAlias: string): { name: string; purged: TableCounts; tombstone: string } {
    if (nameOrAlias === DEFAULT_PROFILE) {
      throw new HermesError("default_profile", "the default profile cannot be deleted (it is HERMES_HOME itself)");
    }
    const name = this.resolve(nameOrAlias);
    this.events.emit("stopping", name);
    // Tombstone first: from here on no late write can recreate anything under the profile.
    const tombstone = this.home.writeTombstone(name);
    this.profileDbs.forget(name);
    rmSync(this.home.profileDir(name), { recursive: true, force: true });
    let purged: TableCounts;
    try {
      purged = purgeProfileState(this.db, name);
    } catch (err) {
      throw databaseError(err, "gateway state.db", this.home.stateDb);
    }
    // The live index follows the database, so the counts above are what was stored.
    this.routing.removeProfile(name);
    this.routing.flush();
    this.events.emit("changed", { kind: "deleted", name });
    return { name, purged, tombstone };
  }
}
