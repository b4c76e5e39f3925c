import { HermesError } from "@hermes/common/pure";

/** `platforms.<platform>.channel_overrides.<id>`. Every key is optional; what is left out falls back to the global config. */
export interface ChannelOverride {
  model?: string | undefined;
  provider?: string | undefined;
  system_prompt?: string | undefined;
}

export type PlatformsConfig = Record<string, { channel_overrides?: Record<string, ChannelOverride> | undefined } | undefined>;

type ChatId = string | number | bigint;

/** Where a turn happens. Platform ids may arrive as numbers; they are compared as strings. */
export interface ChatLocation {
  platform: string;
  chat_id: ChatId;
  thread_id?: ChatId | null | undefined;
  parent_id?: ChatId | null | undefined;
}

export interface ChannelOverrideMatch {
  override: ChannelOverride;
  /** Which id matched: the chat itself, its thread, or the parent channel. */
  matched: "chat" | "thread" | "parent";
  id: string;
  /** The config path, for messages such as "this chat keeps X from platforms.discord.channel_overrides.123". */
  config_path: string;
}

function idText(id: ChatId | null | undefined): string | undefined {
  if (id === null || id === undefined) return undefined;
  const text = String(id).trim();
  return text.length > 0 ? text : undefined;
}

/**
 * Lookup order: exact chat id, then thread id, then parent channel id; the first entry found wins
 * whole (a thread entry that sets only system_prompt does not borrow the parent's model). So a
 * Discord thread inherits its channel's override without an entry of its own.
 */
export function findChannelOverride(platforms: PlatformsConfig | undefined, where: ChatLocation): ChannelOverrideMatch | undefined {
  const overrides = platforms?.[where.platform]?.channel_overrides;
  if (!overrides) return undefined;
  const order: [ChannelOverrideMatch["matched"], string | undefined][] = [
    ["chat", idText(where.chat_id)],
    ["thread", idText(where.thread_id)],
    ["parent", idText(where.parent_id)],
  ];
  for (const [matched, id] of order) {
    if (id === undefined || !Object.hasOwn(overrides, id)) continue;
    const override = overrides[id];
    if (override) return { override, matched, id, config_path: `platforms.${where.platform}.channel_overrides.${id}` };
  }
  return undefined;
}

/** A `/model` choice that holds for one session. */
export interface SessionModelOverride {
  model: string;
  provider?: string | undefined;
}

export interface GlobalModelConfig {
  model?: string | undefined;
  provider?: string | undefined;
  /** A gateway-wide per-turn prompt; a channel override's system_prompt replaces it for that chat. */
  ephemeral_system_prompt?: string | undefined;
}

export interface ModelResolutionInput {
  session?: SessionModelOverride | undefined;
  channel?: ChannelOverride | undefined;
  global: GlobalModelConfig;
}

export type ModelSource = "session" | "channel" | "global" | "default";

export interface ResolvedModel {
  model: string;
  provider: string;
  model_source: ModelSource;
  provider_source: ModelSource;
  /** Injected per turn, never stored in the transcript. */
  ephemeral_system_prompt?: string | undefined;
}

/** With nothing configured anywhere, a bot runs on the embedded deterministic provider. */
export const DEFAULT_PROVIDER = "local";
export const DEFAULT_LOCAL_MODEL = "local";

function present(value: string | undefined): value is string {
  return typeof value === "string" && value.trim().length > 0;
}

function firstOf(layers: [ModelSource, string | undefined][]): [ModelSource, string] | undefined {
  for (const [source, value] of layers) if (present(value)) return [source, value];
  return undefined;
}

/**
 * Resolution: session `/model` override > channel override > global config, for the model and,
 * independently, for the provider. A channel that sets only a provider keeps the global model on
 * that provider (the documented "provider-only override" case).
 */
export function resolveModel(input: ModelResolutionInput): ResolvedModel {
  const { session, channel, global } = input;
  const provider = firstOf([
    ["session", session?.provider],
    ["channel", channel?.provider],
    ["global", global.provider],
  ]) ?? ["default", DEFAULT_PROVIDER];
  let model = firstOf([
    ["session", session?.model],
    ["channel", channel?.model],
    ["global", global.model],
  ]);
  if (model === undefined) {
    if (provider[1] !== DEFAULT_PROVIDER) {
      throw new HermesError(
        "missing_config",
        `no model configured for provider ${JSON.stringify(provider[1])}: set \`model:\` in the profile's config.yaml (or the gateway's), or pick one with /model`,
        { data: { provider: provider[1] } },
      );
    }
    model = ["default", DEFAULT_LOCAL_MODEL];
  }
  const ephemeral = channel?.system_prompt ?? global.ephemeral_system_prompt;
  return {
    model: model[1],
    provider: provider[1],
    model_source: model[0],
    provider_source: provider[0],
    ...(present(ephemeral) ? { ephemeral_system_prompt: ephemeral } : {}),
  };
}

/**
 * The system prompt sent with one turn: the bot's own prompt (persona, roster) then the ephemeral
 * channel prompt. It goes into the request only; the stored history never contains it, so changing
 * or removing the override never leaves stale instructions in a transcript.
 */
export function composeSystemPrompt(base: string, ephemeral?: string): string {
  if (!present(ephemeral)) return base;
  return base.length > 0 ? `${base}\n\n${ephemeral}` : ephemeral;
}

export type ModelCommand =
  | { kind: "show" }
  | { kind: "reset" }
  | { kind: "set"; model: string; provider?: string | undefined; global: boolean };

const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$/;
const PROVIDER_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const MODEL_USAGE = "usage: /model [NAME] [--provider P] [--global] | /model --reset";

/** Parses `/model`, `/model NAME [--provider P] [--global]`, `/model --reset`. */
export function parseModelCommand(text: string): ModelCommand {
  const words = text.trim().split(/\s+/);
  if (words[0] !== "/model") throw new HermesError("invalid_params", `not a /model command; ${MODEL_USAGE}`);
  let model: string | undefined;
  let provider: string | undefined;
  let global = false;
  let reset = false;
  for (let i = 1; i < words.length; i++) {
    const word = words[i]!;
    if (word === "--global") global = true;
    else if (word === "--reset") reset = true;
    else if (word === "--provider") {
      provider = words[++i];
      if (provider === undefined || !PROVIDER_NAME.test(provider)) {
        throw new HermesError("invalid_params", `--provider needs a provider name such as openai or local; ${MODEL_USAGE}`);
      }
    } else if (word.startsWith("--")) throw new HermesError("invalid_params", `unknown option ${word}; ${MODEL_USAGE}`);
    else if (model === undefined && MODEL_NAME.test(word)) model = word;
    else throw new HermesError("invalid_params", `unexpected ${JSON.stringify(word)}; ${MODEL_USAGE}`);
  }
  if (reset) {
    if (model !== undefined || global || provider !== undefined)
      throw new HermesError("invalid_params", `--reset takes nothing else; ${MODEL_USAGE}`);
    return { kind: "reset" };
  }
  if (model === undefined) {
    if (global || provider !== undefined) throw new HermesError("invalid_params", `name the model; ${MODEL_USAGE}`);
    return { kind: "show" };
  }
  return { kind: "set", model, provider, global };
}

export interface ModelCommandContext {
  session?: SessionModelOverride | undefined;
  channel?: ChannelOverrideMatch | undefined;
  global: GlobalModelConfig;
}

export interface ModelCommandOutcome {
  /** The session override to keep from now on (undefined: none). */
  session: SessionModelOverride | undefined;
  /** When set, persist this as the global default (config.yaml `model`/`provider`). */
  global_write?: { model: string; provider?: string | undefined };
  /** What the next turn in this chat will use. */
  effective: ResolvedModel;
  notice: string;
}

function describe(resolved: ResolvedModel, channel: ChannelOverrideMatch | undefined): string {
  const from =
    resolved.model_source === "session"
      ? "this chat's /model choice"
      : resolved.model_source === "channel"
        ? `the channel override ${channel?.config_path ?? ""}`.trim()
        : resolved.model_source === "global"
          ? "the global config"
          : "the built-in default";
  return `${resolved.model} on ${resolved.provider} (from ${from})`;
}

/**
 * `/model` semantics. Plain `/model NAME` is a session override (it beats the channel override).
 * `/model NAME --global` writes the global default and drops this chat's session override, so the
 * new default takes effect here, except where a channel override sets a model: a one-off global
 * switch must not silently wipe out a per-channel design, so the channel keeps winning.
 */
export function applyModelCommand(command: ModelCommand, ctx: ModelCommandContext): ModelCommandOutcome {
  const channel = ctx.channel?.override;
  switch (command.kind) {
    case "show": {
      const effective = resolveModel({ session: ctx.session, channel, global: ctx.global });
      return { session: ctx.session, effective, notice: `Using ${describe(effective, ctx.channel)}.` };
    }
    case "reset": {
      const effective = resolveModel({ channel, global: ctx.global });
      return { session: undefined, effective, notice: `Session model choice cleared; using ${describe(effective, ctx.channel)}.` };
    }
    case "set": {
      if (!command.global) {
        const session = { model: command.model, provider: command.provider };
        const effective = resolveModel({ session, channel, global: ctx.global });
        return { session, effective, notice: `This chat now uses ${describe(effective, ctx.channel)}.` };
      }
      const global = { ...ctx.global, model: command.model, ...(command.provider !== undefined ? { provider: command.provider } : {}) };
      const effective = resolveModel({ channel, global });
      const write = { model: command.model, ...(command.provider !== undefined ? { provider: command.provider } : {}) };
      const here =
        effective.model_source === "channel"
          ? ` This chat keeps ${effective.model} from ${ctx.channel?.config_path ?? "its channel override"}; channel overrides win over the global default.`
          : "";
      return { session: undefined, global_write: write, effective, notice: `Global default set to ${command.model}.${here}` };
    }
  }
}
