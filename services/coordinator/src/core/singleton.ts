import { isValidGatewayId } from "./keys.js";

/**
 * Singletons: `<prefix>/singletons/<name>` = {gateway_id}, put under the holder's lease by a
 * transaction that expects no key. Exactly one gateway holds a name while its lease lives; when the
 * holder dies, etcd expires the lease, deletes the key, and a waiting gateway takes it. A holder runs
 * the job only while its own lease is valid by its own clock: a paused holder stops before etcd
 * could hand the name to another.
 */

export interface SingletonKey {
  /** The lease the key is under (decimal id). */
  lease: string;
  /** The holder the value names; null when the value is not a valid record. */
  gatewayId: string | null;
}

export function encodeSingletonValue(gatewayId: string): string {
  return JSON.stringify({ gateway_id: gatewayId });
}

export function parseSingletonValue(text: string): string | null {
  try {
    const value = JSON.parse(text) as unknown;
    if (value && typeof value === "object" && !Array.isArray(value)) {
      const id = (value as Record<string, unknown>).gateway_id;
      return isValidGatewayId(id) ? id : null;
    }
  } catch {
    // not JSON: the holder is unknown
  }
  return null;
}

export interface SingletonView {
  /** This gateway runs the job now. */
  holding: boolean;
  /** Try to create the key (it is free and this gateway can hold it). */
  acquire: boolean;
  /** Who holds it (null: nobody, or a value that names no gateway). */
  holder: string | null;
}

/** What one observation of the key means for this gateway. */
export function viewSingleton(input: {
  self: string;
  selfLease: string | null;
  leaseValid: boolean;
  key: SingletonKey | null;
}): SingletonView {
  const { key } = input;
  if (key === null) return { holding: false, acquire: input.leaseValid && input.selfLease !== null, holder: null };
  const ours = input.selfLease !== null && key.lease === input.selfLease;
  return { holding: ours && input.leaseValid, acquire: false, holder: ours ? input.self : key.gatewayId };
}

export type SingletonTransition = "acquired" | "lost" | null;

export function singletonTransition(wasHolding: boolean, holding: boolean): SingletonTransition {
  if (!wasHolding && holding) return "acquired";
  if (wasHolding && !holding) return "lost";
  return null;
}
