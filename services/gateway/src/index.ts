// Rooms export what a script or benchmark drives directly: the pipelined Append stream
// client, the RoomSource a replica pulls from, the packed page encoding, the SQLite store.

export { toWireProfile, toWireRoutine, toWireRun } from "./api/botmode/wire.js";
export { AppendStream, roomClient } from "./api/grpc/room-client.js";
export { toWirePage } from "./api/rooms/wire.js";
export { BotMetadata, type SectionDeleted, type SectionInfo } from "./app/botmode/bot-metadata.js";
export { ChatService } from "./app/chat.js";
export { DEFAULT_GRPC, DEFAULT_HTTP, loadGatewayConfigFile, resolveGatewaySettings } from "./app/config.js";
export { ModelConfigSource } from "./app/model-config.js";
export { PeerClient, type PeerMessage, type PeerSender } from "./app/peers/peer-client.js";
export { addPeer, assertPeerName, listPeers, type PeerListing, removePeer } from "./app/peers/peer-config.js";
export { peerDirectory } from "./app/peers/peer-directory.js";
export { type ProfileSettingsResult, setProfileSettings } from "./app/profile-settings.js";
export { type ProfileInfo, ProfileService } from "./app/profiles.js";
export {
  GrpcRoomSource,
  GrpcRoomSourceFactory,
  type RoomSource,
  type RoomSourceFactory,
  type SourceSpec,
} from "./app/rooms/room-source.js";
export { CLIENT_ACTOR, RoomsService, type RoomsSettings } from "./app/rooms/rooms-service.js";
export { fromWirePage, packEvents, unpackEvents } from "./app/rooms/wire.js";
export { localTimeZone, type RoutineInput, RoutineService } from "./app/routines/routine-service.js";
export { directRouting, SessionService } from "./app/sessions.js";
export type { ProfileSettings } from "./core/models/profile-settings.js";
export { parsePeerTarget } from "./core/peers/run-request.js";
export { PROMPT_FILE_MAX_BYTES, promptFileError, promptFromFile, promptSource } from "./core/routines/prompt.js";
export { Gateway, type GatewayOptions, VERSION } from "./daemon/gateway.js";
export { openGatewayDb, ProfileDatabases } from "./store/gateway-store.js";
export { defaultHomePath, HermesHome } from "./store/home.js";
export { purgeProfileState, rekeyProfileState } from "./store/identity-store.js";
export { RoomsStore } from "./store/rooms-store.js";
export { RoutinesStore } from "./store/routines-store.js";
