import { DaemonState, isoTime } from "@hermes/common";
import { type GatewayStatus, PlatformStatus } from "@hermes/proto/hermes/v1/gateway";
import type { GatewayStatusSource } from "../api/grpc/gateway-service.js";
import { peerLinks } from "../peers/app/peer-directory.js";
import type { TelegramBotStatus } from "../platforms/telegram/app/telegram-bot.js";
import type { Foundation } from "./foundation.js";
import type { Services } from "./services.js";
import { VERSION } from "./version.js";

/** The running gateway's state (DaemonState), and `gateway status` from it. */
export class GatewayState extends DaemonState implements GatewayStatusSource {
  constructor(
    private readonly f: Foundation,
    private readonly services: Services,
  ) {
    super(f.clock);
  }

  /** Ready, and writes work (a full disk makes the gateway not ready until a write commits again). */
  get serving(): boolean {
    return this.ready && this.f.profileDbs.writeFailure() === undefined;
  }

  status(): GatewayStatus {
    const { f, services } = this;
    return {
      gateway_id: f.id,
      version: VERSION,
      home: f.home.root,
      grpc_address: this.grpcAddress,
      http_address: this.httpAddress,
      control_socket: f.home.controlSocket,
      started_at: isoTime(this.startedAt),
      uptime_seconds: this.uptimeSeconds,
      profiles: services.profiles.names().length,
      rooms: services.rooms.count(),
      peers: peerLinks(services.config),
      relay: services.relay?.status() ?? { url: "", connection: "", state: "disabled", roster_epoch: 0 },
      platforms: this.platforms(),
    };
  }

  /** The `api` platform (the HTTP route, served only with an API key) and Telegram. */
  private platforms(): PlatformStatus[] {
    const api = PlatformStatus.fromPartial({
      platform: "api",
      state: this.f.settings.apiKeys.length > 0 ? "on" : "off",
      detail: this.f.settings.apiKeys.length > 0 ? "" : "no API key: set API_SERVER_KEY or gateway.api_key to serve it",
    });
    const telegram = this.services.telegram;
    return [
      api,
      telegram ? telegramPlatformStatus(telegram.status()) : PlatformStatus.fromPartial({ platform: "telegram", state: "disabled" }),
    ];
  }
}

function telegramPlatformStatus(s: TelegramBotStatus): PlatformStatus {
  return {
    platform: "telegram",
    state: s.state,
    // A retry under way shows as polling, without the failure it retries (that stays in the log).
    detail: s.conflict ?? (s.last_error && s.state !== "polling" ? `${s.last_error.kind}: ${s.last_error.message}` : ""),
    profile: s.profile,
    bot: s.bot?.username ? `@${s.bot.username}` : "",
    singleton: s.singleton ?? "",
    ...(s.offset !== undefined ? { offset: s.offset } : {}),
    ...(s.waiting_ms !== undefined ? { waiting_seconds: s.waiting_ms / 1000 } : {}),
    updates_received: s.counters.updates_received,
    turns: s.counters.turns,
    commands: s.counters.commands,
    replies_sent: s.replies_sent,
    refusals: s.counters.refusals,
    ignored: s.counters.ignored,
    errors: Object.fromEntries(s.errors.map((e) => [`${e.where}.${e.kind}`, e.count])),
    chats: s.chats,
    topics: s.topics,
    in_progress: s.in_progress,
  };
}
