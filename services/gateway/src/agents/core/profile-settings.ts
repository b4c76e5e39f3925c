import { HermesError } from "@hermes/common/pure";

/**
 * `hermes profile set NAME …`: the settings a command line may change in a profile's config.yaml,
 * checked and turned into edits (no I/O). Each setting is one flag (named in the messages) and
 * one key path.
 */
export interface ProfileSettings {
  provider?: string | undefined;
  model?: string | undefined;
  base_url?: string | undefined;
  api_key_env?: string | undefined;
}

/** One change to config.yaml: the value at a key path. */
export interface ConfigEdit {
  path: string[];
  value: string;
}

const PROVIDER_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const MODEL_MAX_CHARS = 200;

function refuse(message: string): never {
  throw new HermesError("invalid_params", message);
}

/** An http(s) URL with a host and no credentials (a key belongs in an environment variable, not in config.yaml). */
export function assertBaseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return refuse(`--base-url ${JSON.stringify(value)} is not a URL: give one such as http://127.0.0.1:11434/v1`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    refuse(`--base-url must be http:// or https://, got ${url.protocol}// (e.g. http://127.0.0.1:11434/v1)`);
  }
  if (url.hostname === "") refuse(`--base-url ${JSON.stringify(value)} has no host`);
  if (url.username || url.password)
    refuse("--base-url must not carry a user or password: put the key in an environment variable (--api-key-env)");
  if (url.search || url.hash) refuse("--base-url must not have a query or fragment: give the endpoint's base, e.g. http://HOST:PORT/v1");
  return value;
}

/**
 * The edits for `settings`. `currentProvider` is the profile's effective provider, which an
 * endpoint setting applies to when --provider is not given.
 */
export function planProfileSettings(settings: ProfileSettings, currentProvider: string): ConfigEdit[] {
  if (Object.values(settings).every((v) => v === undefined))
    refuse("nothing to set: pass --provider, --model, --base-url or --api-key-env");
  const { provider, model, base_url, api_key_env } = settings;
  if (provider !== undefined && !PROVIDER_NAME.test(provider)) {
    refuse(`--provider ${JSON.stringify(provider)}: letters, digits, '-' and '_' (1-64), e.g. openai`);
  }
  if (model !== undefined && (model.trim() === "" || model.length > MODEL_MAX_CHARS || /[\u0000-\u001f\u007f]/.test(model))) {
    refuse(`--model must be 1-${MODEL_MAX_CHARS} characters without control characters`);
  }
  if (api_key_env !== undefined && !ENV_NAME.test(api_key_env)) {
    refuse(
      `--api-key-env ${JSON.stringify(api_key_env)} is not an environment variable name (letters, digits, '_'; not starting with a digit)`,
    );
  }
  if (base_url !== undefined) assertBaseUrl(base_url);
  const target = provider ?? currentProvider;
  if (target === "local" && (base_url !== undefined || api_key_env !== undefined)) {
    refuse("the local provider has no endpoint or key; pass --provider NAME (e.g. --provider openai) with --base-url");
  }
  const edits: ConfigEdit[] = [];
  if (provider !== undefined) edits.push({ path: ["provider"], value: provider });
  if (model !== undefined) edits.push({ path: ["model"], value: model });
  if (base_url !== undefined) edits.push({ path: ["providers", target, "base_url"], value: base_url });
  if (api_key_env !== undefined) edits.push({ path: ["providers", target, "api_key_env"], value: api_key_env });
  return edits;
}
