// What the `hermes` command runs in its own process when no gateway holds HERMES_HOME: the store,
// profiles and sessions, Bot Mode metadata and routines, model settings, peers' config and client,
// and prompt files. None of it starts a server, so the gateway daemon and its transports (etcd,
// Telegram, the web console, JSON-RPC) stay unloaded: loading them was most of a command's start-up.

export { toWireProfile, toWireRoutine, toWireRun } from "./api/botmode/wire.js";
export { BotMetadata } from "./app/botmode/bot-metadata.js";
export { busyTimeoutFromEnv, DEFAULT_DB_BUSY_TIMEOUT_MS } from "./app/config.js";
export { ModelConfigSource } from "./app/model-config.js";
export { PeerClient, type PeerSender } from "./app/peers/peer-client.js";
export { addPeer, assertPeerName, listPeers, removePeer } from "./app/peers/peer-config.js";
export { peerDirectory } from "./app/peers/peer-directory.js";
export { type ProfileSettingsResult, setProfileSettings } from "./app/profile-settings.js";
export { ProfileService } from "./app/profiles.js";
export { localTimeZone, RoutineService } from "./app/routines/routine-service.js";
export { directRouting, SessionService } from "./app/sessions.js";
export type { ProfileSettings } from "./core/models/profile-settings.js";
export { parsePeerTarget } from "./core/peers/run-request.js";
export { PROMPT_FILE_MAX_BYTES, promptFileError, promptFromFile, promptSource } from "./core/routines/prompt.js";
export { openGatewayDb, ProfileDatabases } from "./store/gateway-store.js";
export { HermesHome } from "./store/home.js";
export { RoutinesStore } from "./store/routines-store.js";
