import type { ServiceHandlers } from "@hermes/common";
import type { ControlServiceServer, GatewayServiceServer, GatewayStatus } from "@hermes/proto/hermes/v1/gateway";
import type { ChatService } from "../../agents/app/chat.js";
import { type BotModeApi, PROFILE_METHODS } from "../../botmode/api/methods.js";
import { toWireProfile } from "../../botmode/api/wire.js";
import type { ProfileService } from "../../identity/app/profiles.js";
import { grpcHandlers } from "../methods/unary-table.js";

/** Whatever reports the running gateway's status (the daemon). */
export interface GatewayStatusSource {
  status(): GatewayStatus;
}

/**
 * GatewayService over gRPC: a thin adapter; validation and behaviour live in the app services.
 * The profile reads and UpdateProfile come from the Bot Mode method table (`profiles.*`).
 */
export function gatewayServiceHandlers(deps: {
  botMode: BotModeApi;
  chat: ChatService;
  status: GatewayStatusSource;
}): ServiceHandlers<GatewayServiceServer> {
  const { chat, status } = deps;
  const profiles: ProfileService = deps.botMode.profiles;
  const { listProfiles, getProfile, updateProfile } = grpcHandlers(PROFILE_METHODS, deps.botMode);
  return {
    status: () => status.status(),
    listProfiles: listProfiles!,
    getProfile: getProfile!,
    updateProfile: updateProfile!,
    createProfile: (req) =>
      toWireProfile(
        profiles.create(req.name, {
          ...(req.title ? { title: req.title } : {}),
          ...(req.description ? { description: req.description } : {}),
          ...(req.model ? { model: req.model } : {}),
          ...(req.provider ? { provider: req.provider } : {}),
          ...(req.clone_from ? { clone_from: req.clone_from } : {}),
          ...(req.soul ? { soul: req.soul } : {}),
        }),
      ),
    renameProfile: (req) => {
      const r = profiles.rename(req.old_name, req.new_name);
      return { ...r, profile: toWireProfile(r.profile) };
    },
    deleteProfile: (req) => profiles.delete(req.name),
    chat: (req, ctx) => chat.turn({ profile: req.profile, text: req.text, session_id: req.session_id || undefined, signal: ctx.signal }),
  };
}

/** ControlService: only on the local control socket. */
export function controlServiceHandlers(deps: { profiles: ProfileService }): ServiceHandlers<ControlServiceServer> {
  return {
    migrateProfileIdentity: (req) => deps.profiles.migrateIdentity(req.old_name, req.new_name),
  };
}
