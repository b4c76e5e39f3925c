import { type ErrorReason, HermesError } from "@hermes/common/pure";
import { ID_RULE, messageLength } from "@hermes/contract";
import { z } from "zod";
import { canonicalJson, NotJsonError, utf8Bytes } from "../../rooms/core/canonical-json.js";
import { checkLabel, describeType } from "./labels.js";

/**
 * A bot's look and place in the roster, kept in its `profile.yaml` (so it moves with the profile
 * folder on a rename): display name, hidden, section, avatar and the clients' own `ui_meta`.
 * Title and description stay in `config.yaml`, beside the model, because the turn engine reads them
 * for the persona; `checkTitle`/`checkDescription` validate them for `profiles.update`.
 */

export const DISPLAY_NAME_MAX = 64;
export const AVATAR_SEED_MAX = 128;
/** `ui_meta` serialized as compact JSON, in UTF-8 bytes. */
export const UI_META_MAX_BYTES = 16 * 1024;
/** The same bounds as the config.yaml schema, so a title accepted by `profile create` is accepted here. */
export const TITLE_MAX = 200;
export const DESCRIPTION_MAX = 2000;

export const AVATAR_STYLES = ["blob", "geometric", "image"] as const;
/** The six pinnable blob-face silhouettes; `null` lets the seed choose. */
export const AVATAR_SILHOUETTES = ["round", "organic", "boxy", "nub", "cloud", "sun"] as const;
export type AvatarStyle = (typeof AVATAR_STYLES)[number];
export type AvatarSilhouette = (typeof AVATAR_SILHOUETTES)[number];

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

export interface Avatar {
  style: AvatarStyle;
  /** What the face is drawn from; `null` means the profile name (see `effectiveAvatarSeed`). */
  seed: string | null;
  /** The face is kept when the name changes: locking pins `seed`, so a locked face always has one. */
  locked: boolean;
  silhouette: AvatarSilhouette | null;
}

export interface ProfileMeta {
  /** `null`: the profile name is shown. */
  display_name: string | null;
  /** Display-only: mentions, rooms, deliveries and routines ignore it. */
  hidden: boolean;
  /** A section id, or `null` for Unassigned. */
  section: string | null;
  avatar: Avatar;
  ui_meta: JsonObject;
}

export const DEFAULT_AVATAR: Readonly<Avatar> = Object.freeze({ style: "blob", seed: null, locked: false, silhouette: null });

export function defaultProfileMeta(): ProfileMeta {
  return { display_name: null, hidden: false, section: null, avatar: { ...DEFAULT_AVATAR }, ui_meta: {} };
}

/** The fields a client may set; anything else in a patch is refused (clients keep their own data in `ui_meta`). */
export const META_FIELDS = ["display_name", "hidden", "section", "avatar", "ui_meta"] as const;
export const AVATAR_FIELDS = ["style", "seed", "locked", "silhouette"] as const;
export type MetaField = (typeof META_FIELDS)[number];

/** The raw `profile.yaml` mapping: the known fields plus any key this version does not know, kept as is. */
export type ProfileMetaDocument = Record<string, unknown>;

const VALID = {
  display_name: `text of 1-${DISPLAY_NAME_MAX} characters on one line (null shows the profile name)`,
  hidden: "true or false",
  section: `a section id matching ${ID_RULE}, or null for Unassigned`,
  avatar: `a mapping with ${AVATAR_FIELDS.join(", ")}`,
  "avatar.style": `one of ${AVATAR_STYLES.join(", ")}`,
  "avatar.seed": `text of at most ${AVATAR_SEED_MAX} characters, or null to draw the face from the profile name`,
  "avatar.locked": "true or false",
  "avatar.silhouette": `one of ${AVATAR_SILHOUETTES.join(", ")}, or null to let the seed choose`,
  ui_meta: `a JSON object of at most ${UI_META_MAX_BYTES} bytes serialized`,
} as const;

type ValidKey = keyof typeof VALID;

function mustBe(key: ValidKey) {
  return { error: (issue: { input: unknown }) => `must be ${VALID[key]} (got ${describeType(issue.input)})` };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

const displayNameSchema = z.string(mustBe("display_name")).transform((value, ctx) => {
  try {
    return checkLabel(value, "display_name", DISPLAY_NAME_MAX);
  } catch (err) {
    // checkLabel says what is wrong and what is valid; the field name is added by the reader.
    ctx.issues.push({ code: "custom", input: value, message: (err as Error).message.replace(/^display_name: /, "") });
    return z.NEVER;
  }
});

const uiMetaSchema = z.unknown().transform((value, ctx): JsonObject => {
  if (!isPlainObject(value)) {
    ctx.issues.push({ code: "custom", input: value, message: `must be ${VALID.ui_meta} (got ${describeType(value)})` });
    return z.NEVER;
  }
  let json: string;
  try {
    json = canonicalJson(value);
  } catch (err) {
    if (!(err instanceof NotJsonError)) throw err;
    ctx.issues.push({ code: "custom", input: value, message: `must be ${VALID.ui_meta}: ${err.message.replace(/^\$/, "ui_meta")}` });
    return z.NEVER;
  }
  const size = utf8Bytes(json);
  if (size > UI_META_MAX_BYTES) {
    ctx.issues.push({
      code: "custom",
      input: value,
      message: `is ${size} bytes serialized; it must be ${VALID.ui_meta}`,
      params: { reason: "payload_too_large", limit: UI_META_MAX_BYTES, size },
    });
    return z.NEVER;
  }
  return JSON.parse(json) as JsonObject;
});

/**
 * `profile.yaml`. Every known field may be absent or null (its default). Unknown keys, at the top
 * and inside `avatar`, pass through untouched: a file written by a newer version keeps what this one
 * does not understand, and so does the existing `created_at`.
 */
export const profileMetaSchema = z.looseObject(
  {
    display_name: displayNameSchema.nullable().optional(),
    hidden: z.boolean(mustBe("hidden")).nullable().optional(),
    section: z.string(mustBe("section")).regex(new RegExp(ID_RULE), mustBe("section")).nullable().optional(),
    avatar: z
      .looseObject(
        {
          style: z.enum(AVATAR_STYLES, mustBe("avatar.style")).nullable().optional(),
          seed: z
            .string(mustBe("avatar.seed"))
            .refine((seed) => messageLength(seed) <= AVATAR_SEED_MAX, mustBe("avatar.seed"))
            .nullable()
            .optional(),
          locked: z.boolean(mustBe("avatar.locked")).nullable().optional(),
          silhouette: z.enum(AVATAR_SILHOUETTES, mustBe("avatar.silhouette")).nullable().optional(),
        },
        mustBe("avatar"),
      )
      .nullable()
      .optional(),
    ui_meta: uiMetaSchema.nullable().optional(),
  },
  { error: (issue) => `must be a mapping of ${META_FIELDS.join(", ")} (got ${describeType(issue.input)})` },
);

export interface MetaProblem {
  /** `hidden`, `avatar.style`, `ui_meta`, or `(top level)`. */
  field: string;
  message: string;
  /** What is valid there. */
  valid: string;
  reason: ErrorReason;
}

export interface ReadMeta {
  meta: ProfileMeta;
  /** Fields that were invalid and read as their default; empty for a sound file. */
  problems: MetaProblem[];
}

function problemOf(issue: z.core.$ZodIssue): MetaProblem {
  // A problem deep inside ui_meta belongs to ui_meta as a whole; avatar problems name the avatar field.
  const path = issue.path.map(String).slice(0, issue.path[0] === "avatar" ? 2 : 1);
  const field = path.length === 0 ? "(top level)" : path.join(".");
  const params = (issue as { params?: { reason?: ErrorReason } }).params;
  return {
    field,
    message: `${field}: ${issue.message}`,
    valid: field in VALID ? VALID[field as ValidKey] : `a mapping of ${META_FIELDS.join(", ")}`,
    reason: params?.reason ?? "invalid_params",
  };
}

function withoutField(document: Record<string, unknown>, field: string): Record<string, unknown> {
  const [top, inner] = field.split(".") as [string, string | undefined];
  if (inner === undefined) {
    const { [top]: _dropped, ...rest } = document;
    return rest;
  }
  const { [inner]: _dropped, ...avatar } = document[top] as Record<string, unknown>;
  return { ...document, [top]: avatar };
}

/**
 * Reads a `profile.yaml` mapping. Never throws on content: a field that is invalid reads as its
 * default and is reported in `problems` (so one hand-edited file cannot break the roster), and an
 * update refuses to save while a problem stands.
 */
export function readProfileMeta(raw: unknown): ReadMeta {
  const problems: MetaProblem[] = [];
  if (!isPlainObject(raw)) {
    const parsed = profileMetaSchema.safeParse(raw);
    if (!parsed.success) problems.push(problemOf(parsed.error.issues[0]!));
    return { meta: defaultProfileMeta(), problems };
  }
  let document = raw;
  // Each round drops the fields zod refused and parses again. Issues are per field, so the second
  // round succeeds; the third is only a guard.
  for (let round = 0; round < 3; round++) {
    const parsed = profileMetaSchema.safeParse(document);
    if (parsed.success) {
      const data = parsed.data;
      const avatar = data.avatar ?? {};
      return {
        meta: {
          display_name: data.display_name ?? null,
          hidden: data.hidden ?? false,
          section: data.section ?? null,
          avatar: {
            style: avatar.style ?? DEFAULT_AVATAR.style,
            seed: avatar.seed ?? null,
            locked: avatar.locked ?? false,
            silhouette: avatar.silhouette ?? null,
          },
          ui_meta: data.ui_meta ?? {},
        },
        problems,
      };
    }
    for (const issue of parsed.error.issues) {
      const problem = problemOf(issue);
      if (!problems.some((p) => p.field === problem.field)) problems.push(problem);
      document = withoutField(document, problem.field);
    }
  }
  throw new HermesError("internal", `profile.yaml could not be read: ${problems.map((p) => p.message).join("; ")}`);
}

/** The face's input: the seed when one is set (randomized or pinned), else the profile name. */
export function effectiveAvatarSeed(meta: ProfileMeta, profile: string): string {
  return meta.avatar.seed ?? profile;
}

/**
 * Writes `meta` into `base` (the mapping read from the file). A field whose value did not change
 * keeps the file's spelling, unless it is among `rewrite` (the fields an update gave); a changed one
 * is written normalized, or left out when it is back to its default, so the file stays as small as
 * what was set. Unknown keys and `created_at` stay as they were.
 */
export function profileMetaDocument(
  meta: ProfileMeta,
  base: ProfileMetaDocument = {},
  rewrite: readonly string[] = [],
): ProfileMetaDocument {
  const { meta: was, problems } = readProfileMeta(base);
  const unchanged = (field: string, a: unknown, b: unknown) => {
    const top = field.split(".")[0]!;
    return canonicalJson(a) === canonicalJson(b) && !rewrite.includes(top) && !problems.some((p) => p.field === field || p.field === top);
  };
  const put = (into: Record<string, unknown>, field: string, key: string, value: unknown, old: unknown, isDefault: boolean) => {
    if (unchanged(field, value, old)) return;
    if (isDefault) delete into[key];
    else into[key] = value;
  };
  const out: ProfileMetaDocument = { ...base };
  put(out, "display_name", "display_name", meta.display_name, was.display_name, meta.display_name === null);
  put(out, "hidden", "hidden", meta.hidden, was.hidden, !meta.hidden);
  put(out, "section", "section", meta.section, was.section, meta.section === null);
  const avatar: Record<string, unknown> = isPlainObject(base.avatar) ? { ...base.avatar } : {};
  for (const key of AVATAR_FIELDS) {
    const value = meta.avatar[key];
    put(avatar, `avatar.${key}`, key, value, was.avatar[key], value === DEFAULT_AVATAR[key]);
  }
  if (Object.keys(avatar).length > 0) out.avatar = avatar;
  else delete out.avatar;
  put(out, "ui_meta", "ui_meta", meta.ui_meta, was.ui_meta, Object.keys(meta.ui_meta).length === 0);
  return out;
}

/** JSON Merge Patch (RFC 7396): objects merge key by key, `null` removes, anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return patch;
  const out: Record<string, unknown> = isPlainObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key], value);
  }
  return out;
}

function checkPatchShape(patch: unknown): Record<string, unknown> {
  if (!isPlainObject(patch)) {
    throw new HermesError("invalid_params", `the update must be a mapping of ${META_FIELDS.join(", ")} (got ${describeType(patch)})`, {
      data: { field: "(top level)", valid: META_FIELDS },
    });
  }
  const unknownKey = Object.keys(patch).find((key) => !(META_FIELDS as readonly string[]).includes(key));
  if (unknownKey !== undefined) {
    throw new HermesError(
      "invalid_params",
      `${unknownKey}: is not a profile metadata field; the fields are ${META_FIELDS.join(", ")} (keep client data in ui_meta)`,
      { data: { field: unknownKey, valid: META_FIELDS } },
    );
  }
  const avatar = patch.avatar;
  if (isPlainObject(avatar)) {
    const unknownAvatarKey = Object.keys(avatar).find((key) => !(AVATAR_FIELDS as readonly string[]).includes(key));
    if (unknownAvatarKey !== undefined) {
      throw new HermesError(
        "invalid_params",
        `avatar.${unknownAvatarKey}: is not an avatar field; the fields are ${AVATAR_FIELDS.join(", ")}`,
        {
          data: { field: `avatar.${unknownAvatarKey}`, valid: AVATAR_FIELDS },
        },
      );
    }
  }
  return patch;
}

export interface MetaPatchContext {
  /** The profile whose file this is (the face of an unseeded avatar is drawn from it). */
  profile: string;
  /** The ids of the sections that exist now. */
  section_ids: readonly string[];
}

export interface MetaPatchResult {
  document: ProfileMetaDocument;
  meta: ProfileMeta;
  /** Top-level fields whose value changed, in `META_FIELDS` order. */
  changed: MetaField[];
}

/**
 * `profiles.update`: only the fields given change; `null` clears a field to its default; `avatar`
 * and `ui_meta` merge key by key (RFC 7396), so two clients writing different keys do not undo each
 * other. The whole result is validated before anything is written. A section that does not exist is
 * refused when the patch names it; a stale one left in the file (its section was deleted) reads as
 * Unassigned and is dropped. Locking a face with no seed pins the seed to what the face is drawn from
 * now, so a later rename keeps the face.
 */
export function applyProfileMetaPatch(raw: unknown, patch: unknown, ctx: MetaPatchContext): MetaPatchResult {
  const given = checkPatchShape(patch);
  const base: ProfileMetaDocument = isPlainObject(raw) ? raw : {};
  const before = readProfileMeta(base).meta;
  const merged = mergePatch(base, given) as ProfileMetaDocument;
  if (typeof given.section === "string" && !ctx.section_ids.includes(given.section)) {
    throw new HermesError(
      "not_found",
      `section: ${JSON.stringify(given.section)} does not exist; list sections with: hermes sections list`,
      {
        data: { field: "section", section: given.section, sections: [...ctx.section_ids] },
      },
    );
  }
  if (typeof merged.section === "string" && !ctx.section_ids.includes(merged.section)) delete merged.section;

  const { meta, problems } = readProfileMeta(merged);
  const problem = problems[0];
  if (problem !== undefined) {
    const top = problem.field.split(".")[0]!;
    if (top in given) {
      throw new HermesError(problem.reason, problem.message, { data: { field: problem.field, valid: problem.valid } });
    }
    throw new HermesError(
      "invalid_config",
      `profile.yaml: ${problem.message}; fix the file, or set ${problem.field} in this update (null resets it)`,
      { data: { field: problem.field, valid: problem.valid } },
    );
  }
  const pinned = pinLockedFace(meta, effectiveAvatarSeed(before, ctx.profile));
  const changed = META_FIELDS.filter((field) => canonicalJson(before[field]) !== canonicalJson(pinned[field]));
  return { document: profileMetaDocument(pinned, base, Object.keys(given)), meta: pinned, changed };
}

/** A locked face with no seed gets `seedNow` (what it is drawn from at this moment). */
export function pinLockedFace(meta: ProfileMeta, seedNow: string): ProfileMeta {
  if (!meta.avatar.locked || meta.avatar.seed !== null) return meta;
  return { ...meta, avatar: { ...meta.avatar, seed: seedNow } };
}

/**
 * The metadata a renamed profile keeps: all of it (the file moves with the folder). A locked face
 * whose seed was never pinned (a hand-edited file) is pinned to the old name so the face stays.
 */
export function metaAfterRename(raw: unknown, oldProfile: string): ProfileMetaDocument {
  const base: ProfileMetaDocument = isPlainObject(raw) ? raw : {};
  const { meta, problems } = readProfileMeta(base);
  if (problems.some((p) => p.field.startsWith("avatar"))) return base;
  const pinned = pinLockedFace(meta, oldProfile);
  return pinned === meta ? base : profileMetaDocument(pinned, base);
}

/**
 * What `profile create --clone-from SOURCE` (the roster's Duplicate) writes into the new profile.yaml:
 * the look, so the copy has the same face (its seed pinned to the source's, since an unseeded face
 * would otherwise follow the new name), silhouette, style and lock, and the same section (a copy
 * lands next to its original). Not copied: the display name (two bots showing the same name could
 * not be told apart), hidden (a bot just made should be visible) and ui_meta (client state such as
 * group memberships belongs to the original).
 */
export function clonedLook(sourceRaw: unknown, sourceProfile: string): ProfileMetaDocument {
  const source = readProfileMeta(sourceRaw).meta;
  const meta: ProfileMeta = {
    ...defaultProfileMeta(),
    section: source.section,
    avatar: { ...source.avatar, seed: effectiveAvatarSeed(source, sourceProfile) },
  };
  return profileMetaDocument(meta);
}

/** The metadata as clients get it (`profiles.get`): defaults filled in, the face's seed resolved. */
export interface ProfileMetaView {
  display_name: string;
  hidden: boolean;
  section: string | null;
  avatar: Avatar & { effective_seed: string };
  ui_meta: JsonObject;
  /** Invalid fields of the file, read as defaults. */
  problems: string[];
}

export function profileMetaView(read: ReadMeta, profile: string, section_ids: readonly string[]): ProfileMetaView {
  const { meta } = read;
  return {
    display_name: meta.display_name ?? profile,
    hidden: meta.hidden,
    section: meta.section !== null && section_ids.includes(meta.section) ? meta.section : null,
    avatar: { ...meta.avatar, effective_seed: effectiveAvatarSeed(meta, profile) },
    ui_meta: meta.ui_meta,
    problems: read.problems.map((p) => p.message),
  };
}

/** Title (config.yaml): one line, at most TITLE_MAX characters; null or blank clears it. */
export function checkTitle(value: unknown): string | null {
  if (value === null || (typeof value === "string" && value.trim() === "")) return null;
  return checkLabel(value, "title", TITLE_MAX);
}

/** Description (config.yaml): several lines allowed, at most DESCRIPTION_MAX characters; null or blank clears it. */
export function checkDescription(value: unknown): string | null {
  const valid = `text of at most ${DESCRIPTION_MAX} characters (line breaks and tabs allowed, no other control characters)`;
  if (value === null || (typeof value === "string" && value.trim() === "")) return null;
  if (typeof value !== "string") {
    throw new HermesError("invalid_params", `description: must be ${valid} (got ${describeType(value)})`, {
      data: { field: "description", valid },
    });
  }
  const text = value.normalize("NFC").replace(/\r\n?/g, "\n").trim();
  const length = messageLength(text);
  if (length > DESCRIPTION_MAX) {
    throw new HermesError("invalid_params", `description: is ${length} characters; it must be ${valid}`, {
      data: { field: "description", valid, limit: DESCRIPTION_MAX, length },
    });
  }
  if (/[^\P{Cc}\n\t]/u.test(text)) {
    throw new HermesError("invalid_params", `description: contains a control character; it must be ${valid}`, {
      data: { field: "description", valid },
    });
  }
  return text;
}
