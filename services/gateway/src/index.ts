// Rooms export what a script or benchmark drives directly: the pipelined Append stream
// client, the RoomSource a replica pulls from, the packed page encoding, the SQLite store.

export { ChatService } from "./agents/app/chat.js";
export { ModelConfigSource } from "./agents/app/model-config.js";
export { type ProfileSettingsResult, setProfileSettings } from "./agents/app/profile-settings.js";
export type { ProfileSettings } from "./agents/core/profile-settings.js";
export { toWireProfile, toWireRoutine, toWireRun } from "./botmode/api/wire.js";
export { BotMetadata, type SectionDeleted, type SectionInfo } from "./botmode/app/bot-metadata.js";
export { Gateway, type GatewayOptions, VERSION } from "./daemon/gateway.js";
export { DEFAULT_GRPC, DEFAULT_HTTP, loadGatewayConfigFile, resolveGatewaySettings } from "./home/app/config.js";
export { openGatewayDb, ProfileDatabases } from "./home/store/gateway-store.js";
export { defaultHomePath, HermesHome } from "./home/store/home.js";
export { type ProfileInfo, ProfileService } from "./identity/app/profiles.js";
export { directRouting, SessionService } from "./identity/app/sessions.js";
export { purgeProfileState, rekeyProfileState } from "./identity/store/identity-store.js";
export { PeerClient, type PeerMessage, type PeerSender } from "./peers/app/peer-client.js";
export { addPeer, assertPeerName, listPeers, type PeerListing, removePeer } from "./peers/app/peer-config.js";
export { peerDirectory } from "./peers/app/peer-directory.js";
export { parsePeerTarget } from "./peers/core/run-request.js";
export { AppendStream, roomClient } from "./rooms/api/room-client.js";
export { toWirePage } from "./rooms/api/wire.js";
export {
  GrpcRoomSource,
  GrpcRoomSourceFactory,
  type RoomSource,
  type RoomSourceFactory,
  type SourceSpec,
} from "./rooms/app/room-source.js";
export { CLIENT_ACTOR, RoomsService, type RoomsSettings } from "./rooms/app/rooms-service.js";
export { fromWirePage, packEvents, unpackEvents } from "./rooms/app/wire.js";
export { RoomsStore } from "./rooms/store/rooms-store.js";
export { localTimeZone, type RoutineInput, RoutineService } from "./routines/app/routine-service.js";
export { PROMPT_FILE_MAX_BYTES, promptFileError, promptFromFile, promptSource } from "./routines/core/prompt.js";
export { RoutinesStore } from "./routines/store/routines-store.js";
