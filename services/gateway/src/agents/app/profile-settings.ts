import { HermesError, validateConfig } from "@hermes/common";
import { DEFAULT_PROFILE } from "@hermes/contract";
import { type Document, parse as parseYaml } from "yaml";
import { gatewayConfigSchema, type ModelConfig, modelConfigSchema } from "../../home/app/config.js";
import type { HermesHome } from "../../home/store/home.js";
import { type ConfigEdit, type ProfileSettings, planProfileSettings } from "../core/profile-settings.js";
import { providerKeyEnv } from "./agents.js";
import { DEFAULT_OPENAI_ENTRY, ModelConfigSource, profileConfigFile, readConfigDocument } from "./model-config.js";

/** What `profile set` changed, and where the bot's model now points. */
export interface ProfileSettingsResult {
  profile: string;
  file: string;
  changed: string[];
  provider: string;
  model: string | null;
  base_url: string | null;
  /** The variable the key is read from (null for `local`). */
  api_key_env: string | null;
  /** Whether that variable is set in the profile's .env, HERMES_HOME/.env or this process's environment. */
  key_set: boolean;
}

/**
 * `hermes profile set NAME …`: edits the profile's config.yaml in place (other keys and comments
 * kept, written atomically, 0600) after checking the result: it must validate, and a provider
 * other than `local` must have an endpoint. A running gateway picks the change up on the next turn
 * (it re-reads config files when they change).
 */
export function setProfileSettings(
  home: HermesHome,
  profile: string,
  settings: ProfileSettings,
  env: NodeJS.ProcessEnv = process.env,
): ProfileSettingsResult {
  if (!home.isLiveProfile(profile)) {
    throw new HermesError("not_found", `no profile ${profile} in ${home.root}; hermes profile list shows them`, { data: { profile } });
  }
  const source = new ModelConfigSource(home, env);
  const before = source.forProfile(profile);
  const edits = planProfileSettings(settings, before.global.provider ?? "local");
  const { file, text, own } = editProfileConfig(home, profile, (doc) => {
    for (const edit of edits) doc.setIn(edit.path, edit.value);
  });
  const provider = own.provider ?? before.global.provider ?? "local";
  const entry = provider === "local" ? undefined : endpointOf(provider, { ...before.providers, ...own.providers }, file);
  home.writeFile(file, text);
  const keyEnv = entry ? providerKeyEnv(provider, entry) : null;
  return {
    profile,
    file,
    changed: edits.map(describeEdit),
    provider,
    model: own.model ?? before.global.model ?? null,
    base_url: entry?.base_url ?? null,
    api_key_env: keyEnv,
    key_set: keyEnv !== null && (source.forProfile(profile).secret(keyEnv) ?? "") !== "",
  };
}

/** A config.yaml edited in memory and checked: the text to write (comments kept) and what it holds. */
export interface ConfigEditPlan {
  file: string;
  text: string;
  own: ModelConfig;
}

/**
 * Edits a profile's config.yaml as a document (comments and other keys kept) and validates the
 * result against its schema; nothing is written, so the caller can check more before it writes `text`.
 */
export function editProfileConfig(home: HermesHome, profile: string, edit: (doc: Document) => void): ConfigEditPlan {
  const file = profileConfigFile(home, profile);
  const doc = readConfigDocument(file);
  edit(doc);
  const text = doc.toString();
  // Checked as plain values (the document keeps long integers exact as BigInt, which no schema expects).
  const own: ModelConfig = validateConfig(
    profile === DEFAULT_PROFILE ? gatewayConfigSchema : modelConfigSchema,
    parseYaml(text) ?? {},
    file,
  );
  return { file, text, own };
}

function endpointOf(provider: string, providers: NonNullable<ModelConfig["providers"]>, file: string) {
  const entry = providers[provider] ?? (provider === "openai" ? DEFAULT_OPENAI_ENTRY : undefined);
  if (!entry) {
    throw new HermesError(
      "invalid_params",
      `provider ${provider} has no endpoint in ${file}: pass --base-url URL (its OpenAI-compatible API, e.g. http://127.0.0.1:11434/v1)`,
      { data: { provider } },
    );
  }
  return entry;
}

function describeEdit(edit: ConfigEdit): string {
  return `${edit.path.join(".")}: ${edit.value}`;
}
