import type { ServiceHandlers } from "@hermes/common";
import type { RelayAdminServiceServer } from "@hermes/proto/hermes/v1/relay";
import type { Relay } from "../app/relay.js";

/** RelayAdminService on the control socket: connection keys and status. */
export function adminServiceHandlers(relay: () => Relay): ServiceHandlers<RelayAdminServiceServer> {
  return {
    addKey: (req) => relay().keys.add(req.connection),
    listKeys: () => {
      const r = relay();
      return { connections: r.keys.list((c) => r.sessions.isOnline(c)) };
    },
    revokeKey: (req) => relay().revokeKey(req.connection),
    status: () => relay().status(),
  };
}
