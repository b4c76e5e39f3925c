import { HermesError } from "@hermes/common/client";
import type { ProfileSettings, ProfileSettingsResult } from "@hermes/gateway";
import type { Command } from "commander";
import type { CommandRunner } from "../main.js";
import { emit } from "../output.js";

/** The flags of `profile set`: each one setting (a new setting is one more row here and in the gateway's plan). */
const SETTING_FLAGS: readonly { key: keyof ProfileSettings; flag: string; help: string }[] = [
  { key: "provider", flag: "--provider <name>", help: "`local` (the built-in stand-in) or an OpenAI-compatible provider, e.g. openai" },
  { key: "model", flag: "--model <model>", help: "the model name as the provider knows it (e.g. llama3.2, gpt-4o-mini)" },
  {
    key: "base_url",
    flag: "--base-url <url>",
    help: "the provider's OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1 (Ollama), http://127.0.0.1:8080/v1 (llama.cpp), http://127.0.0.1:8000/v1 (vLLM)",
  },
  {
    key: "api_key_env",
    flag: "--api-key-env <var>",
    help: "the variable holding the provider's key, looked up in the profile's .env, HERMES_HOME/.env, then the environment",
  },
];

function describe(r: ProfileSettingsResult): string {
  const where = r.provider === "local" ? "the built-in local stand-in" : `${r.provider}${r.base_url ? ` at ${r.base_url}` : ""}`;
  const lines = [`✓ ${r.profile} now uses ${r.model ?? "(no model set)"} on ${where}; its next turn uses it (${r.file})`];
  if (r.api_key_env && !r.key_set) {
    lines.push(
      `  its key is read from ${r.api_key_env}, which is not set: add ${r.api_key_env}=KEY to the profile's .env or HERMES_HOME/.env (a local server that needs no key accepts any value)`,
    );
  }
  return lines.join("\n");
}

/** `hermes profile set NAME [--provider P] [--model M] [--base-url URL] [--api-key-env VAR]`. */
export function registerProfileSetCommand(profile: Command, run: CommandRunner): void {
  const command = profile
    .command("set <name>")
    .description(
      "change a profile's settings in its config.yaml (comments kept); e.g. point it at an OpenAI-compatible server: --provider openai --base-url URL --model M",
    );
  for (const s of SETTING_FLAGS) command.option(s.flag, s.help);
  command.action(
    run(async (ctx, name: string, o: Record<string, string | undefined>) => {
      if (ctx.gatewayUrl) {
        throw new HermesError("refused", "profile set edits the files under --home: run it on the gateway's own host, without --gateway");
      }
      const settings: ProfileSettings = {};
      for (const s of SETTING_FLAGS) {
        const value = o[camelCase(s.key)];
        if (value !== undefined) settings[s.key] = value;
      }
      const { setProfileSettings } = await import("@hermes/gateway");
      const r = setProfileSettings(ctx.home, name, settings);
      emit(ctx.json, r, () => describe(r));
    }),
  );
}

/** commander's option key for a setting (`base_url` ← `--base-url` → `baseUrl`). */
function camelCase(key: string): string {
  return key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}
