import { rpcMethods } from "../../api/methods/unary-table.js";
import type { RpcMethod } from "../../rooms/api/room-methods.js";
import { BOTMODE_METHODS, type BotModeApi, PROFILE_METHODS } from "./methods.js";

/** `profiles.*`, `sections.*` and `routines.*` over JSON-RPC, generated from the Bot Mode method tables. */
export function botModeRpcMethods(api: BotModeApi): Record<string, RpcMethod> {
  return { ...rpcMethods(PROFILE_METHODS, api), ...rpcMethods(BOTMODE_METHODS, api) };
}
