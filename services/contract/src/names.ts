import { HermesError } from "./errors.js";

/**
 * Profile ids (a named profile is the folder HERMES_HOME/profiles/<id>). The rule also blocks path
 * traversal, since it admits no `/` or `.` first.
 */
export const PROFILE_NAME_RULE = "^[a-z0-9][a-z0-9_-]{0,63}$";
const PROFILE_NAME_RE = new RegExp(PROFILE_NAME_RULE);

export const DEFAULT_PROFILE = "default";

export function isValidProfileName(name: string): boolean {
  return PROFILE_NAME_RE.test(name);
}

export function assertProfileName(name: string, what = "profile name"): string {
  if (!isValidProfileName(name)) {
    throw new HermesError(
      "invalid_name",
      `invalid ${what} ${JSON.stringify(name)}: it must match ${PROFILE_NAME_RULE} (lower-case letters, digits, "_" and "-", 1-64 characters, starting with a letter or digit)`,
      { data: { name, rule: PROFILE_NAME_RULE } },
    );
  }
  return name;
}

/** Room ids, event ids and delivery ids: ≤128 characters of a safe set (no path separators). */
export const ID_RULE = "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$";
const ID_RE = new RegExp(ID_RULE);

export function isValidId(id: string): boolean {
  return ID_RE.test(id);
}

export function assertId(id: string, what: string): string {
  if (!isValidId(id)) {
    throw new HermesError("invalid_params", `invalid ${what} ${JSON.stringify(id)}: it must match ${ID_RULE}`, {
      data: { [what.replace(/\s+/g, "_")]: id, rule: ID_RULE },
    });
  }
  return id;
}

/**
 * Gateway ids, as a gateway names itself (config, its hello to the relay): letters, digits, ".",
 * "_" and "-", 1-64 characters, upper case allowed. Rooms name their authority and members'
 * gateways by it, and the relay's roster carries it.
 */
export const GATEWAY_ID_RULE = "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$";
const GATEWAY_ID_RE = new RegExp(GATEWAY_ID_RULE);

export function isValidGatewayId(id: unknown): id is string {
  return typeof id === "string" && GATEWAY_ID_RE.test(id);
}

/**
 * Relay connection names and bot handles, as they appear in `<handle>@<connection>` targets
 * (lower-case letters, digits, `.`, `_`, `-`; 1-64 characters, starting with a letter or digit).
 * No `/` or `@`, so a target splits unambiguously.
 */
export const NAME_RULE = "^[a-z0-9][a-z0-9._-]{0,63}$";
const NAME_RE = new RegExp(NAME_RULE);

export function isValidName(name: string): boolean {
  return NAME_RE.test(name);
}

export function assertConnectionName(name: string): string {
  if (!isValidName(name)) {
    throw new HermesError(
      "invalid_name",
      `invalid connection name ${JSON.stringify(name)}: it must match ${NAME_RULE} (lower-case letters, digits, ".", "_" and "-", 1-64 characters)`,
      { data: { name, rule: NAME_RULE } },
    );
  }
  return name;
}
