export { DEFAULT_RELAY_GRPC, DEFAULT_RELAY_HTTP, type RelayOverrides, type RelaySettings, resolveRelaySettings } from "./app/config.js";
export { KeyAdmin } from "./app/key-admin.js";
export { KEY_PREFIX } from "./core/keys.js";
export { NAME_RULE as CONNECTION_NAME_RULE } from "./core/names.js";
export { RELAY_VERSION, Relay, type RelayOptions, relayControlSocket, relayDbPath } from "./daemon/relay.js";
export { RelayStore } from "./store/relay-store.js";

export const VERSION = "0.1.0";
