export { RELAY_VERSION, Relay, type RelayOptions, relayControlSocket, relayDbPath } from "./daemon/relay.js";
export {
  DEFAULT_RELAY_GRPC,
  DEFAULT_RELAY_HTTP,
  type RelayOverrides,
  type RelaySettings,
  resolveRelaySettings,
} from "./home/app/config.js";
export { RelayStore } from "./home/store/relay-store.js";
export { KeyAdmin } from "./keys/app/key-admin.js";
export { KEY_PREFIX } from "./keys/core/keys.js";

export const VERSION = "0.1.0";
