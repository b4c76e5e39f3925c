import type { ServiceHandlers } from "@hermes/common";
import type { BotModeServiceServer } from "@hermes/proto/hermes/v1/botmode";
import { BOTMODE_METHODS, type BotModeApi } from "../botmode/methods.js";
import { grpcHandlers } from "../methods/unary-table.js";

/** BotModeService (sections and routines) over gRPC, generated from the Bot Mode method table. */
export function botModeServiceHandlers(api: BotModeApi): ServiceHandlers<BotModeServiceServer> {
  return grpcHandlers(BOTMODE_METHODS, api) as ServiceHandlers<BotModeServiceServer>;
}
