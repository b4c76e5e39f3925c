import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { HermesError, readEnvFile, readYamlFile, validateConfig } from "@hermes/common";
import { DEFAULT_PROFILE } from "@hermes/contract";
import { type Document, parseDocument } from "yaml";
import { metaOf, profileMetaFile, readProfileMetaFile } from "../../botmode/store/botmode-files.js";
import { type GatewayConfigFile, gatewayConfigSchema, type ModelConfig, modelConfigSchema } from "../../home/app/config.js";
import type { HermesHome } from "../../home/store/home.js";
import type { ChannelOverride, GlobalModelConfig, PlatformsConfig } from "../core/channel-overrides.js";

/** `providers.<name>`: an OpenAI-compatible endpoint. */
export interface ProviderEntry {
  base_url: string;
  api_key_env?: string | undefined;
  timeout_seconds?: number | undefined;
}

/** Who a bot is, for its system prompt and the local provider. */
export interface PersonaConfig {
  display_name: string;
  handle: string;
  title: string;
  description: string;
  soul: string;
}

/**
 * A profile's effective model configuration: its own config.yaml over the gateway-wide
 * HERMES_HOME/config.yaml, key by key (providers and channel overrides entry by entry).
 */
export interface ProfileModelConfig {
  profile: string;
  persona: PersonaConfig;
  global: GlobalModelConfig;
  providers: Record<string, ProviderEntry>;
  fallback_providers: string[];
  platforms: PlatformsConfig;
  /** Where `/model --global` writes: the profile's config.yaml (HERMES_HOME/config.yaml for default). */
  config_file: string;
  /** A secret by name: the profile's .env, then HERMES_HOME/.env, then the process environment. */
  secret(name: string): string | undefined;
}

/** Where a profile's own model keys live: its config.yaml (HERMES_HOME/config.yaml for default). */
export function profileConfigFile(home: HermesHome, profile: string): string {
  return profile === DEFAULT_PROFILE ? home.configFile : join(home.profileDir(profile), "config.yaml");
}

/** A config.yaml as a YAML document to edit with its comments kept; a missing or empty file is an empty map. */
export function readConfigDocument(file: string): Document {
  const doc = parseDocument(existsSync(file) ? readFileSync(file, "utf8") : "", { intAsBigInt: true });
  if (doc.errors.length > 0) throw new HermesError("invalid_config", `${file}: not valid YAML: ${doc.errors[0]!.message}`);
  if (doc.contents === null) doc.contents = doc.createNode({}) as unknown as typeof doc.contents;
  return doc;
}

/** The built-in `openai` entry, used when `provider: openai` has no `providers.openai`. */
export const DEFAULT_OPENAI_ENTRY: ProviderEntry = { base_url: "https://api.openai.com/v1", api_key_env: "OPENAI_API_KEY" };

interface Cached<T> {
  /** The file's mtime and size when it was read (-1 when it was missing). */
  mtimeMs: number;
  size: number;
  value: T;
}

/**
 * Reads files through a cache that is refreshed when a file's mtime or size changes (one stat per
 * use). An unchanged file gives back the very value read before, so callers can memoise on it.
 */
class FileCache {
  private readonly entries = new Map<string, Cached<unknown>>();

  get<T>(file: string, read: (file: string) => T): T {
    // A missing file reads as its empty value (no exception: most profiles have no SOUL.md or .env).
    const st = statSync(file, { throwIfNoEntry: false });
    const mtimeMs = st ? st.mtimeMs : -1;
    const size = st ? st.size : -1;
    const hit = this.entries.get(file);
    if (hit && hit.mtimeMs === mtimeMs && hit.size === size) return hit.value as T;
    const value = read(file);
    this.entries.set(file, { mtimeMs, size, value });
    return value;
  }

  forget(file: string): void {
    this.entries.delete(file);
  }
}

/** What a profile's effective config is assembled from: the files' cached values. */
interface ConfigInputs {
  base: GatewayConfigFile;
  own: ModelConfig;
  soul: string;
  profileEnv: Record<string, string>;
  homeEnv: Record<string, string>;
  displayName: string;
}

const NO_ENV: Record<string, string> = {};

/** Unchanged files give back the same cached values, so identity says "nothing changed". */
function sameInputs(a: ConfigInputs, b: ConfigInputs): boolean {
  return (
    a.base === b.base &&
    a.own === b.own &&
    a.soul === b.soul &&
    a.profileEnv === b.profileEnv &&
    a.homeEnv === b.homeEnv &&
    a.displayName === b.displayName
  );
}

function mergePlatforms(base: ModelConfig["platforms"], own: ModelConfig["platforms"]): PlatformsConfig {
  const out: PlatformsConfig = {};
  for (const name of new Set([...Object.keys(base ?? {}), ...Object.keys(own ?? {})])) {
    const overrides: Record<string, ChannelOverride> = { ...base?.[name]?.channel_overrides, ...own?.[name]?.channel_overrides };
    out[name] = { channel_overrides: overrides };
  }
  return out;
}

/**
 * Loads ProfileModelConfig for turns. Files are re-read only when they change, so editing a
 * config.yaml takes effect on the next turn without a restart (and changes the agent signature,
 * which rebuilds the cached agent).
 */
export class ModelConfigSource {
  private readonly files = new FileCache();
  /** Each profile's last assembled config and what it was assembled from. */
  private readonly assembled = new Map<string, { inputs: ConfigInputs; config: ProfileModelConfig }>();

  constructor(
    private readonly home: HermesHome,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  /** HERMES_HOME/config.yaml as validated (peers, delivery and agent settings live there). */
  gatewayConfig(): GatewayConfigFile {
    return this.gatewayFile();
  }

  private gatewayFile(): GatewayConfigFile {
    return this.files.get(this.home.configFile, (f) => validateConfig(gatewayConfigSchema, readYamlFile(f), f));
  }

  private profileFile(profile: string): ModelConfig {
    if (profile === DEFAULT_PROFILE) return this.gatewayFile();
    const file = join(this.home.profileDir(profile), "config.yaml");
    return this.files.get(file, (f) => validateConfig(modelConfigSchema, readYamlFile(f), f));
  }

  private text(file: string): string {
    return this.files.get(file, (f) => (existsSync(f) ? readFileSync(f, "utf8") : ""));
  }

  private envFile(file: string): Record<string, string> {
    return this.files.get(file, (f) => readEnvFile(f));
  }

  /** The profile.yaml rule (profile-meta.ts): a valid display name, else the profile name. */
  private displayName(profile: string): string {
    const meta = this.files.get(profileMetaFile(this.home, profile), () => metaOf(readProfileMetaFile(this.home, profile)).meta);
    return meta.display_name ?? profile;
  }

  /**
   * The profile's effective config. While none of its files changed this is the object returned
   * before (the files are still checked on every call, so a hand edit counts on the next turn).
   */
  forProfile(profile: string): ProfileModelConfig {
    const dir = this.home.profileDir(profile);
    const inputs: ConfigInputs = {
      base: this.gatewayFile(),
      own: this.profileFile(profile),
      soul: this.text(join(dir, "SOUL.md")),
      profileEnv: profile === DEFAULT_PROFILE ? NO_ENV : this.envFile(join(dir, ".env")),
      homeEnv: this.envFile(this.home.envFile),
      displayName: this.displayName(profile),
    };
    const memo = this.assembled.get(profile);
    if (memo && sameInputs(memo.inputs, inputs)) return memo.config;
    const config = this.assemble(profile, inputs);
    this.assembled.set(profile, { inputs, config });
    return config;
  }

  private assemble(profile: string, { base, own, soul, profileEnv, homeEnv, displayName }: ConfigInputs): ProfileModelConfig {
    const soulFile = soul.trim();
    const env = this.env;
    const ephemeral = own.ephemeral_system_prompt ?? base.ephemeral_system_prompt;
    return {
      profile,
      persona: {
        display_name: displayName,
        handle: profile,
        title: own.title ?? "",
        description: own.description ?? "",
        soul: soulFile.length > 0 ? soulFile : (own.soul ?? ""),
      },
      global: {
        model: own.model ?? base.model,
        provider: own.provider ?? base.provider,
        ...(ephemeral !== undefined ? { ephemeral_system_prompt: ephemeral } : {}),
      },
      providers: { ...base.providers, ...own.providers },
      fallback_providers: own.fallback_providers ?? base.fallback_providers ?? [],
      platforms: mergePlatforms(base.platforms, own.platforms),
      config_file: profileConfigFile(this.home, profile),
      secret: (name) => profileEnv[name] ?? homeEnv[name] ?? env[name],
    };
  }

  /**
   * `/model NAME --global`: sets `model` (and `provider` when given) in the profile's config.yaml,
   * keeping the file's other keys and comments.
   */
  writeGlobalModel(profile: string, model: string, provider: string | undefined): void {
    const file = profileConfigFile(this.home, profile);
    const doc = readConfigDocument(file);
    doc.set("model", model);
    if (provider !== undefined) doc.set("provider", provider);
    this.home.writeFile(file, doc.toString());
    this.files.forget(file);
  }
}
