import { HermesError } from "@hermes/common/client";
import type { ProfileSettings, ProfileSettingsResult } from "@hermes/gateway/direct";
import type { Profile } from "@hermes/proto/hermes/v1/gateway";
import type { Command } from "commander";
import type { CommandRunner } from "../main.js";
import { emit } from "../output.js";
import { profilesBackend } from "../profiles-backend.js";

/**
 * The flags of `profile set`, one row per setting. Model rows edit config.yaml on this host
 * (`setProfileSettings`); metadata rows become one `profiles.update` patch (profile.yaml, and title
 * and description in config.yaml), sent to the running gateway or applied to the files when none runs.
 * A new setting is one more row here (and, for a model setting, in the gateway's plan).
 */
type FlagValue = string | boolean | undefined;

interface ModelFlag {
  kind: "model";
  key: keyof ProfileSettings;
  flag: string;
  help: string;
}

interface MetaFlag {
  kind: "meta";
  /** commander's option key. */
  option: string;
  flag: string;
  help: string;
  /** The patch for the flag's value (a `--no-…` flag gives false). */
  patch(value: string | boolean): Record<string, unknown>;
}

/** An empty value resets a text field (`--display-name ""` shows the profile name again). */
const textOrReset = (value: string | boolean) => (value === "" ? null : value);

const FLAGS: readonly (ModelFlag | MetaFlag)[] = [
  {
    kind: "model",
    key: "provider",
    flag: "--provider <name>",
    help: "`local` (the built-in stand-in) or an OpenAI-compatible provider, e.g. openai",
  },
  { kind: "model", key: "model", flag: "--model <model>", help: "the model name as the provider knows it (e.g. llama3.2, gpt-4o-mini)" },
  {
    kind: "model",
    key: "base_url",
    flag: "--base-url <url>",
    help: "the provider's OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1 (Ollama), http://127.0.0.1:8080/v1 (llama.cpp), http://127.0.0.1:8000/v1 (vLLM)",
  },
  {
    kind: "model",
    key: "api_key_env",
    flag: "--api-key-env <var>",
    help: "the variable holding the provider's key, looked up in the profile's .env, HERMES_HOME/.env, then the environment",
  },
  {
    kind: "meta",
    option: "displayName",
    flag: "--display-name <name>",
    help: "the name rosters show (1-64 characters; empty: the profile name)",
    patch: (v) => ({ display_name: textOrReset(v) }),
  },
  {
    kind: "meta",
    option: "title",
    flag: "--title <title>",
    help: "role shown in rosters (one line, at most 200 characters; empty clears it)",
    patch: (v) => ({ title: v }),
  },
  {
    kind: "meta",
    option: "description",
    flag: "--description <text>",
    help: "what the bot does (at most 2,000 characters; empty clears it)",
    patch: (v) => ({ description: v }),
  },
  {
    kind: "meta",
    option: "hidden",
    flag: "--hidden",
    help: "hide the bot in rosters (display only: mentions, rooms and routines go on)",
    patch: (v) => ({ hidden: v }),
  },
  { kind: "meta", option: "hidden", flag: "--no-hidden", help: "show the bot in rosters again", patch: (v) => ({ hidden: v }) },
  {
    kind: "meta",
    option: "section",
    flag: "--section <section>",
    help: "file the bot in a section (its name or id; see hermes sections list)",
    patch: (v) => ({ section: v }),
  },
  {
    kind: "meta",
    option: "section",
    flag: "--no-section",
    help: "take the bot out of its section (Unassigned)",
    patch: () => ({ section: null }),
  },
  {
    kind: "meta",
    option: "avatarSeed",
    flag: "--avatar-seed <seed>",
    help: "what the face is drawn from (a re-roll; empty: the profile name)",
    patch: (v) => ({ avatar: { seed: textOrReset(v) } }),
  },
  {
    kind: "meta",
    option: "avatarStyle",
    flag: "--avatar-style <style>",
    help: "blob, geometric or image",
    patch: (v) => ({ avatar: { style: v } }),
  },
  {
    kind: "meta",
    option: "avatarSilhouette",
    flag: "--avatar-silhouette <shape>",
    help: "a blob silhouette: round, organic, boxy, nub, cloud or sun (empty: the seed chooses)",
    patch: (v) => ({ avatar: { silhouette: textOrReset(v) } }),
  },
  {
    kind: "meta",
    option: "lockFace",
    flag: "--lock-face",
    help: "keep the face when the name changes",
    patch: (v) => ({ avatar: { locked: v } }),
  },
  {
    kind: "meta",
    option: "lockFace",
    flag: "--no-lock-face",
    help: "let the face follow the name again",
    patch: (v) => ({ avatar: { locked: v } }),
  },
  {
    kind: "meta",
    option: "uiMeta",
    flag: "--ui-meta <json>",
    help: "client data to merge into ui_meta (a JSON object, at most 16 KiB in all; a key set to null is removed)",
    patch: (v) => ({ ui_meta: parseJsonFlag("--ui-meta", v) }),
  },
];

function parseJsonFlag(flag: string, value: string | boolean): unknown {
  try {
    return JSON.parse(String(value));
  } catch (err) {
    throw new HermesError("invalid_params", `${flag}: is not JSON (${(err as Error).message}); give an object such as '{"pinned":true}'`, {
      data: { field: flag },
    });
  }
}

/**
 * Merges the rows' patches (two avatar flags make one avatar patch). A `--x`/`--no-x` pair shares
 * one option key; false is the `--no-x` row's.
 */
function metaPatch(options: Record<string, FlagValue>): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  for (const row of FLAGS) {
    if (row.kind !== "meta") continue;
    const value = options[row.option];
    if (value === undefined || row.flag.startsWith("--no-") !== (value === false)) continue;
    for (const [key, part] of Object.entries(row.patch(value))) {
      patch[key] = key === "avatar" ? { ...(patch[key] as object | undefined), ...(part as object) } : part;
    }
  }
  return patch;
}

function describeModel(r: ProfileSettingsResult): string {
  const where = r.provider === "local" ? "the built-in local stand-in" : `${r.provider}${r.base_url ? ` at ${r.base_url}` : ""}`;
  const lines = [`✓ ${r.profile} now uses ${r.model ?? "(no model set)"} on ${where}; its next turn uses it (${r.file})`];
  if (r.api_key_env && !r.key_set) {
    lines.push(
      `  its key is read from ${r.api_key_env}, which is not set: add ${r.api_key_env}=KEY to the profile's .env or HERMES_HOME/.env (a local server that needs no key accepts any value)`,
    );
  }
  return lines.join("\n");
}

/** The Bot Mode lines of `profile show` (and of `profile set`'s answer). */
export function describeMeta(p: Profile): string {
  const meta = p.meta;
  if (meta === undefined) return "";
  const avatar = meta.avatar;
  const face = avatar
    ? `${avatar.style}, drawn from ${JSON.stringify(avatar.effective_seed)}${avatar.locked ? ", locked" : ""}${avatar.silhouette ? `, ${avatar.silhouette}` : ""}`
    : "-";
  const lines = [
    `display name:  ${p.display_name}`,
    `title:         ${p.title || "-"}`,
    `hidden:        ${meta.hidden ? "yes (display only)" : "no"}`,
    `section:       ${meta.section ? `${meta.section_name} (${meta.section})` : "Unassigned"}`,
    `avatar:        ${face}`,
  ];
  if (meta.ui_meta_json !== "{}") lines.push(`ui_meta:       ${meta.ui_meta_json}`);
  for (const problem of meta.problems) lines.push(`⚠ profile.yaml: ${problem}`);
  return lines.join("\n");
}

function describeUpdated(p: Profile): string {
  return `✓ ${p.name} updated\n${describeMeta(p)}`;
}

/** `hermes profile set NAME [--provider P] [--model M] … [--title T] [--hidden|--no-hidden] [--section S] [--avatar-seed X] …`. */
export function registerProfileSetCommand(profile: Command, run: CommandRunner): void {
  const command = profile
    .command("set <name>")
    .description(
      "change a profile's settings: its model (config.yaml, comments kept; e.g. --provider openai --base-url URL --model M) and how rosters show it (title, description, display name, hidden, section, avatar)",
    );
  for (const row of FLAGS) command.option(row.flag, row.help);
  command.action(
    run(async (ctx, name: string, o: Record<string, FlagValue>) => {
      const settings: ProfileSettings = {};
      for (const row of FLAGS) {
        const value = row.kind === "model" ? o[camelCase(row.key)] : undefined;
        if (row.kind === "model" && typeof value === "string") settings[row.key] = value;
      }
      const patch = metaPatch(o);
      const modelGiven = Object.keys(settings).length > 0;
      const metaGiven = Object.keys(patch).length > 0;
      if (!modelGiven && !metaGiven) {
        throw new HermesError("invalid_params", `nothing to set: pass one of ${FLAGS.map((r) => r.flag.split(" ")[0]).join(", ")}`);
      }
      if (modelGiven && ctx.gatewayUrl) {
        throw new HermesError(
          "refused",
          "the model settings of profile set edit the files under --home: run it on the gateway's own host, without --gateway",
        );
      }
      // The metadata first: the whole patch is checked before anything is written.
      let updated: Profile | undefined;
      if (metaGiven) {
        const backend = await profilesBackend(ctx);
        try {
          updated = await backend.update(name, patch);
        } finally {
          backend.close();
        }
      }
      if (!modelGiven) {
        emit(ctx.json, updated, () => describeUpdated(updated!));
        return;
      }
      const { setProfileSettings } = await import("@hermes/gateway/direct");
      const r = setProfileSettings(ctx.home, updated?.name ?? name, settings);
      if (updated === undefined) emit(ctx.json, r, () => describeModel(r));
      else emit(ctx.json, { ...updated, settings: r }, () => `${describeUpdated(updated)}\n${describeModel(r)}`);
    }),
  );
}

/** commander's option key for a setting (`base_url` ← `--base-url` → `baseUrl`). */
function camelCase(key: string): string {
  return key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}
