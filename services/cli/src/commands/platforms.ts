import { GatewayServiceClient, type PlatformStatus } from "@hermes/proto/hermes/v1/gateway";
import type { Command } from "commander";
import type { CommandRunner } from "../main.js";
import { emit, table } from "../output.js";

/** One line per platform for `gateway status`: `telegram polling (@bot, profile default)`. */
export function platformSummary(p: PlatformStatus): string {
  const about = [p.bot, p.profile ? `profile ${p.profile}` : ""].filter(Boolean).join(", ");
  return `${p.state}${about ? ` (${about})` : ""}${p.detail ? `: ${p.detail}` : ""}`;
}

function counts(record: Record<string, number>): string {
  const entries = Object.entries(record);
  return entries.length === 0 ? "-" : entries.map(([k, n]) => `${k}=${n}`).join(", ");
}

export function registerPlatformsCommands(program: Command, run: CommandRunner): void {
  const platforms = program.command("platforms").description("the chat platforms a gateway serves (api, telegram)");

  platforms
    .command("status")
    .description("per platform: state (telegram: polling, standby, conflict, backoff…), bot, profile, offset, counters")
    .action(
      run(async (ctx) => {
        const gw = ctx.client(GatewayServiceClient);
        const s = await ctx.call(gw, gw.status, {});
        emit(ctx.json, { gateway_id: s.gateway_id, platforms: s.platforms }, () =>
          s.platforms
            .map((p) =>
              p.platform === "api" || p.state === "disabled"
                ? `${p.platform}: ${platformSummary(p)}`
                : [
                    `${p.platform}: ${platformSummary(p)}`,
                    table(
                      ["FIELD", "VALUE"],
                      [
                        ...(p.singleton ? [["singleton", p.singleton]] : []),
                        ["offset", p.offset ?? "-"],
                        ["waiting", p.waiting_seconds !== undefined ? `${Math.ceil(p.waiting_seconds)} s` : "-"],
                        ["updates received", p.updates_received],
                        ["turns", p.turns],
                        ["commands", p.commands],
                        ["replies sent", p.replies_sent],
                        ["refusals", p.refusals],
                        ["chats / topics", `${p.chats} / ${p.topics}`],
                        ["in progress", p.in_progress],
                        ["ignored", counts(p.ignored)],
                        ["errors", counts(p.errors)],
                      ],
                    ).replace(/^/gm, "  "),
                  ].join("\n"),
            )
            .join("\n"),
        );
      }),
    );
}
