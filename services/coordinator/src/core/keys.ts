import { HermesError } from "@hermes/common/pure";
import { GATEWAY_ID_RULE, isValidGatewayId, isValidId } from "@hermes/contract";

/**
 * The key layout of one coordinated mesh in etcd, all under one prefix:
 *
 *     <prefix>/gateways/<gateway_id>           {advertise_url, version}, under the gateway's lease
 *     <prefix>/rooms/<room_id>/authority       the authority record (a plain key; it names the lease)
 *     <prefix>/singletons/<name>               {gateway_id}, under the holder's lease
 */

/** Gateway ids: what a gateway accepts for its own id (the shared rule). */
export { GATEWAY_ID_RULE, isValidGatewayId };

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
  /** Where every room's record lives: `<prefix>/rooms/`. */
  roomsPrefix: string;
  /** The room id of an authority record's key, or null for any other key. */
  roomIdOf(key: string): string | null;
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
    roomsPrefix: `${base}/rooms/`,
    roomIdOf: (key) => {
      const match = key.startsWith(`${base}/rooms/`) ? /^([^/]+)\/authority$/.exec(key.slice(base.length + 7)) : null;
      return match && isValidId(match[1]!) ? match[1]! : null;
    },
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
