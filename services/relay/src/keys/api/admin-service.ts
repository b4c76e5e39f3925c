import type { ServiceHandlers } from "@hermes/common";
import type { RelayAdminServiceServer, RelayStatus } from "@hermes/proto/hermes/v1/relay";
import type { RelayHub } from "../../connections/app/relay-hub.js";
import type { KeyAdmin } from "../app/key-admin.js";

/** Whatever reports the running relay's status (the daemon). */
export interface RelayStatusSource {
  status(): RelayStatus;
}

/** RelayAdminService on the control socket: connection keys and status. */
export function adminServiceHandlers(deps: {
  hub: RelayHub;
  keys: KeyAdmin;
  status: RelayStatusSource;
}): ServiceHandlers<RelayAdminServiceServer> {
  const { hub, keys, status } = deps;
  return {
    addKey: (req) => keys.add(req.connection),
    listKeys: () => ({ connections: keys.list((c) => hub.sessions.isOnline(c)) }),
    revokeKey: (req) => hub.revokeKey(req.connection),
    status: () => status.status(),
  };
}
