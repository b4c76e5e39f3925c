import { HermesError, type ServiceHandlers } from "@hermes/common";
import type { OpsServiceServer } from "@hermes/proto/hermes/v1/ops";
import { callOpsMethod, OPS_METHODS, type OpsDeps } from "./methods.js";

function parseParamsJson(text: string): unknown {
  if (text === "") return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new HermesError("invalid_params", "params_json is not JSON", { data: { field: "params_json" } });
  }
}

/**
 * OpsService over gRPC, generated from the ops method table: `Call(method, params_json)` runs the
 * method the table serves on gRPC (and, on the control socket, the control-only ones) and answers
 * its result as JSON.
 */
export function opsServiceHandlers(deps: OpsDeps, transport: "tcp" | "control"): ServiceHandlers<OpsServiceServer> {
  return {
    call: async (req) => {
      const m = OPS_METHODS.find((x) => x.name === req.method);
      const served = m && (m.transports.includes("grpc") || (transport === "control" && m.transports.includes("control")));
      if (!m || !served) {
        const controlOnly = m?.transports.includes("control") === true;
        throw new HermesError(
          controlOnly ? "refused" : "method_not_found",
          controlOnly
            ? `${req.method} is served on the gateway's control socket only (run the CLI with --home on the gateway's machine)`
            : `OpsService has no method ${JSON.stringify(req.method)}`,
          { data: { method: req.method } },
        );
      }
      const result = await callOpsMethod(deps, m, parseParamsJson(req.params_json));
      return { result_json: JSON.stringify(result) };
    },
  };
}
