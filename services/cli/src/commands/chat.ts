import { HermesError } from "@hermes/common/client";
import { GatewayServiceClient } from "@hermes/proto/hermes/v1/gateway";
import type { Command } from "commander";
import type { CommandRunner } from "../main.js";
import { emit } from "../output.js";

export function registerChatCommand(program: Command, run: CommandRunner): void {
  program
    .command("chat")
    .description("run one turn in the profile's canonical Bot Chat (through the gateway) and print the reply")
    .requiredOption("-q, --query <text>", "the message")
    .option("--session <id>", "another session of the profile instead of the Bot Chat")
    .action(
      run(async (ctx, o: { query: string; session?: string }) => {
        if (!ctx.profile) throw new HermesError("invalid_params", "which profile? pass -p NAME (hermes profile list shows them)");
        const gw = ctx.client(GatewayServiceClient);
        const r = await ctx.call(gw, gw.chat, { profile: ctx.profile, text: o.query, session_id: o.session ?? "" }, 30 * 60_000);
        emit(ctx.json, r, () => r.reply);
      }),
    );
}
