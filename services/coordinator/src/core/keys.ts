import { HermesError, isValidId } from "@hermes/common/pure";

/**
 * The key layout of one coordinated mesh in etcd, all under one prefix:
 *
 *     <prefix>/gateways/<gateway_id>           {advertise_url, version}, under the gateway's lease
 *     <prefix>/rooms/<room_id>/authority       the authority record (a plain key; it names the lease)
 *     <prefix>/singletons/<name>               {gateway_id}, under the holder's lease
 */

/** Gateway ids: what a gateway accepts for its own id (letters, digits, '.', '_', '-'; 1-64). */
export const GATEWAY_ID_RULE = "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$";
const GATEWAY_ID_RE = new RegExp(GATEWAY_ID_RULE);

export function isValidGatewayId(id: unknown): id is string {
  return typeof id === "string" && GATEWAY_ID_RE.test(id);
}

const PREFIX_SEGMENT_RE = /^[A-Za-z0-9._-]{1,64}$/;

/** "/hermes", "hermes/" and "/hermes/" all mean "/hermes"; segments are safe names, at most 8 of them. */
export function normalizePrefix(prefix: string): string {
  const segments = prefix.split("/").filter((s) => s !== "");
  if (segments.length === 0 || segments.length > 8 || !segments.every((s) => PREFIX_SEGMENT_RE.test(s))) {
    throw new HermesError(
      "invalid_config",
      `invalid coordinator prefix ${JSON.stringify(prefix)}: one to eight "/"-separated segments of letters, digits, ".", "_" and "-", e.g. /hermes`,
      { data: { prefix } },
    );
  }
  return `/${segments.join("/")}`;
}

export interface CoordinatorKeys {
  prefix: string;
  gatewaysPrefix: string;
  gateway(id: string): string;
  /** The gateway id of a key under `gatewaysPrefix`, or null for any other key. */
  gatewayIdOf(key: string): string | null;
  authority(roomId: string): string;
  singleton(name: string): string;
}

export function coordinatorKeys(prefix: string): CoordinatorKeys {
  const base = normalizePrefix(prefix);
  const gatewaysPrefix = `${base}/gateways/`;
  return {
    prefix: base,
    gatewaysPrefix,
    gateway: (id) => gatewaysPrefix + checked(id, isValidGatewayId, "gateway id"),
    gatewayIdOf: (key) => {
      if (!key.startsWith(gatewaysPrefix)) return null;
      const id = key.slice(gatewaysPrefix.length);
      return isValidGatewayId(id) ? id : null;
    },
    authority: (roomId) => `${base}/rooms/${checked(roomId, isValidId, "room id")}/authority`,
    singleton: (name) => `${base}/singletons/${checked(name, isValidId, "singleton name")}`,
  };
}

function checked(value: string, valid: (v: string) => boolean, what: string): string {
  if (!valid(value))
    throw new HermesError("invalid_name", `invalid ${what} ${JSON.stringify(value)} for a coordinator key`, {
      data: { [what.replace(/ /g, "_")]: value },
    });
  return value;
}
