import type { GatewayStatus } from "@hermes/proto/hermes/v1/gateway";

/** Anything that can report the gateway's status (the running Gateway). */
export interface GatewayStatusSource {
  status(): GatewayStatus;
}
