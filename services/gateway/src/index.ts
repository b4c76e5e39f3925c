export { ChatService } from "./app/chat.js";
export { DEFAULT_GRPC, DEFAULT_HTTP, loadGatewayConfigFile, resolveGatewaySettings } from "./app/config.js";
export { Gateway, type GatewayOptions, VERSION } from "./app/gateway.js";
export { defaultHomePath, HermesHome } from "./app/home.js";
export { type ProfileInfo, ProfileService } from "./app/profiles.js";
export { directRouting, SessionService } from "./app/sessions.js";
export { openGatewayDb, ProfileDatabases } from "./store/gateway-store.js";
export { purgeProfileState, rekeyProfileState } from "./store/identity-store.js";
