import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { DEFAULT_PROFILE, HermesError, readEnvFile, readYamlFile, validateConfig } from "@hermes/common";
import { type Document, parseDocument } from "yaml";
import type { ChannelOverride, GlobalModelConfig, PlatformsConfig } from "../core/models/channel-overrides.js";
import { metaOf, profileMetaFile, readProfileMetaFile } from "../store/botmode-files.js";
import type { HermesHome } from "../store/home.js";
import { type GatewayConfigFile, gatewayConfigSchema, type ModelConfig, modelConfigSchema } from "./config.js";

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
  stamp: string;
  value: T;
}

/** Reads files through a cache that is refreshed when a file's mtime or size changes (one stat per use). */
class FileCache {
  private readonly entries = new Map<string, Cached<unknown>>();

  get<T>(file: string, read: (file: string) => T): T {
    let stamp = "missing";
    try {
      const st = statSync(file);
      stamp = `${st.mtimeMs}:${st.size}`;
    } catch {
      // A missing file reads as its empty value.
    }
    const hit = this.entries.get(file);
    if (hit && hit.stamp === stamp) return hit.value as T;
    const value = read(file);
    this.entries.set(file, { stamp, value });
    return value;
  }

  forget(file: string): void {
    this.entries.delete(file);
  }
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

  forProfile(profile: string): ProfileModelConfig {
    const base = this.gatewayFile();
    const own = this.profileFile(profile);
    const dir = this.home.profileDir(profile);
    const soulFile = this.text(join(dir, "SOUL.md")).trim();
    const profileEnv = profile === DEFAULT_PROFILE ? {} : this.envFile(join(dir, ".env"));
    const homeEnv = this.envFile(this.home.envFile);
    const env = this.env;
    const ephemeral = own.ephemeral_system_prompt ?? base.ephemeral_system_prompt;
    return {
      profile,
      persona: {
        display_name: this.displayName(profile),
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
