import type { ServiceHandlers } from "@hermes/common";
import type { BotModeServiceServer } from "@hermes/proto/hermes/v1/botmode";
import { grpcHandlers } from "../../api/methods/unary-table.js";
import { BOTMODE_METHODS, type BotModeApi } from "./methods.js";

/** BotModeService (sections and routines) over gRPC, generated from the Bot Mode method table. */
export function botModeServiceHandlers(api: BotModeApi): ServiceHandlers<BotModeServiceServer> {
  return grpcHandlers(BOTMODE_METHODS, api) as ServiceHandlers<BotModeServiceServer>;
}
