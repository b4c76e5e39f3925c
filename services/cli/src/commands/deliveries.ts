import { HermesError } from "@hermes/common/client";
import { RECEIPT_STATES } from "@hermes/contract";
import { DeliveryServiceClient, type Receipt } from "@hermes/proto/hermes/v1/delivery";
import type { Command } from "commander";
import type { CommandRunner } from "../main.js";
import { emit, table } from "../output.js";
import { receiptJson } from "./message.js";

function describe(r: Receipt): string {
  const lines = [
    `delivery:   ${r.delivery_id}`,
    `from:       ${r.from}`,
    `target:     ${r.target}`,
    `state:      ${r.state}${r.reason ? ` [reason: ${r.reason}]` : ""}`,
    `attempts:   ${r.attempts}`,
    `created:    ${r.created_at}`,
    `ended:      ${r.settled_at ?? "-"}`,
  ];
  if (r.error) lines.push(`error:      ${r.error}`);
  if (r.reply !== undefined) lines.push(`reply:      ${r.reply}`);
  return lines.join("\n");
}

export function registerDeliveriesCommands(program: Command, run: CommandRunner): void {
  const deliveries = program.command("deliveries").description("bot-to-bot delivery receipts: list, show");

  deliveries
    .command("list")
    .description("deliveries sent from or run on this gateway, newest first (-p: only those of one bot)")
    .option("--state <state>", `${RECEIPT_STATES.slice(0, -1).join(", ")} or ${RECEIPT_STATES.at(-1)}`)
    .option("--limit <n>", "at most this many (1-1000, default 100)")
    .action(
      run(async (ctx, o: { state?: string; limit?: string }) => {
        const limit = o.limit === undefined ? 0 : Number(o.limit);
        if (!Number.isInteger(limit) || limit < 0 || limit > 1000) {
          throw new HermesError("invalid_params", `--limit must be a whole number from 1 to 1000, got ${o.limit}`);
        }
        const client = ctx.client(DeliveryServiceClient);
        const r = await ctx.call(client, client.listDeliveries, { profile: ctx.profile ?? "", state: o.state ?? "", limit });
        const rows = r.deliveries.map((d) => ({ side: d.side, ...receiptJson(d.receipt!) }));
        emit(ctx.json, { deliveries: rows }, () =>
          rows.length === 0
            ? "no deliveries"
            : table(
                ["ID", "SIDE", "FROM", "TARGET", "STATE", "REASON", "ATTEMPTS", "CREATED"],
                rows.map((d) => [d.delivery_id, d.side, d.from, d.target, d.state, d.reason ?? "-", d.attempts, d.created_at]),
              ),
        );
      }),
    );

  deliveries
    .command("show <id>")
    .description("one delivery's receipt; --json prints every receipt field (unset ones as null)")
    .option("--json", "machine-readable output")
    .action(
      run(async (ctx, id: string, o: { json?: boolean }) => {
        const client = ctx.client(DeliveryServiceClient);
        const r = await ctx.call(client, client.getDelivery, { delivery_id: id });
        emit(ctx.json || o.json === true, receiptJson(r), () => describe(r));
      }),
    );
}
