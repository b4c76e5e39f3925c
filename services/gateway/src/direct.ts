// What the `hermes` command runs in its own process when no gateway holds HERMES_HOME: the store,
// profiles and sessions, Bot Mode metadata and routines, model settings, peers' config and client,
// and prompt files. None of it starts a server, so the gateway daemon and its transports (etcd,
// Telegram, the web console, JSON-RPC) stay unloaded: loading them was most of a command's start-up.

export { type A2aAnswer, A2aPeerClient, type A2aPeerDirectory, a2aPeerDirectory } from "./a2a/app/a2a-peer-client.js";
export { ModelConfigSource } from "./agents/app/model-config.js";
export { type ProfileSettingsResult, setProfileSettings } from "./agents/app/profile-settings.js";
export type { ProfileSettings } from "./agents/core/profile-settings.js";
export { toWireProfile, toWireRoutine, toWireRun } from "./botmode/api/wire.js";
export { BotMetadata } from "./botmode/app/bot-metadata.js";
export { busyTimeoutFromEnv, DEFAULT_DB_BUSY_TIMEOUT_MS } from "./home/app/config.js";
export { openGatewayDb, ProfileDatabases } from "./home/store/gateway-store.js";
export { HermesHome } from "./home/store/home.js";
export { ProfileService } from "./identity/app/profiles.js";
export { directRouting, SessionService } from "./identity/app/sessions.js";
export { PeerClient, type PeerSender } from "./peers/app/peer-client.js";
export { addA2aPeer, addPeer, assertPeerName, listPeers, removePeer } from "./peers/app/peer-config.js";
export { peerDirectory } from "./peers/app/peer-directory.js";
export { parsePeerTarget } from "./peers/core/run-request.js";
export { localTimeZone, RoutineService } from "./routines/app/routine-service.js";
export { PROMPT_FILE_MAX_BYTES, promptFileError, promptFromFile, promptSource } from "./routines/core/prompt.js";
export { RoutinesStore } from "./routines/store/routines-store.js";
