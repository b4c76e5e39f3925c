import type { RpcMethod } from "../../rooms/api/room-methods.js";
import { callOpsMethod, type OpsDeps, opsMethodsFor } from "./methods.js";

/** The operations and console methods over JSON-RPC (/rpc), generated from the ops method table. */
export function opsRpcMethods(deps: OpsDeps): Record<string, RpcMethod> {
  return Object.fromEntries(opsMethodsFor("rpc").map((m) => [m.name, (raw: unknown) => callOpsMethod(deps, m, raw)]));
}
