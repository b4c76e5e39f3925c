import { HermesError } from "@hermes/common/pure";

/**
 * Connection names and bot handles, as they appear in `<handle>@<connection>` targets: the same
 * rule the gateway's target parser uses (lower-case letters, digits, `.`, `_`, `-`; 1-64
 * characters, starting with a letter or digit). No `/` or `@`, so a target splits unambiguously.
 */
export const NAME_RULE = "^[a-z0-9][a-z0-9._-]{0,63}$";
const NAME_RE = new RegExp(NAME_RULE);

export function isValidName(name: string): boolean {
  return NAME_RE.test(name);
}

/**
 * Gateway ids, as a gateway names itself in its hello (the gateway's own rule: upper case allowed).
 * Rooms name a member's gateway by this id, and the roster carries it so a room authority can find
 * the member's connection whatever that connection is called.
 */
export const GATEWAY_ID_RULE = "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$";
const GATEWAY_ID_RE = new RegExp(GATEWAY_ID_RULE);

export function isValidGatewayId(id: string): boolean {
  return GATEWAY_ID_RE.test(id);
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

/** The per-target lane key: one ordered lane per bot (connection + handle), as upstream keys them. */
export function laneKey(connection: string, handle: string): string {
  return `${connection}\u0000${handle}`;
}
