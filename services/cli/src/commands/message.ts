import { HermesError, isErrorReason } from "@hermes/common/client";
import { DeliveryServiceClient, type Receipt } from "@hermes/proto/hermes/v1/delivery";
import type { Command } from "commander";
import type { CommandRunner } from "../main.js";
import { emit } from "../output.js";

export interface ReceiptJson {
  delivery_id: string;
  from: string;
  target: string;
  state: string;
  reason: string | null;
  error: string | null;
  attempts: number;
  created_at: string;
  settled_at: string | null;
  reply: string | null;
}

/** §4 receipt JSON: every field present, unset ones as null (what `deliveries show --json` prints). */
export function receiptJson(r: Receipt): ReceiptJson {
  return {
    delivery_id: r.delivery_id,
    from: r.from,
    target: r.target,
    state: r.state,
    reason: r.reason ?? null,
    error: r.error ?? null,
    attempts: r.attempts,
    created_at: r.created_at,
    settled_at: r.settled_at ?? null,
    reply: r.reply ?? null,
  };
}

/** The completion text a bot would get in its Bot Chat (§4). */
export function outcomeText(r: Receipt): string {
  if (r.state === "settled") return r.reply ?? "";
  if (r.state === "cancelled") return `Delivery to ${r.target} was cancelled: ${r.error ?? "cancelled"}`;
  if (r.state === "queued" || r.state === "claimed") return `Delivery to ${r.target} is ${r.state}`;
  return `Delivery to ${r.target} failed [reason: ${r.reason ?? "unknown"}]: ${r.error ?? "no error text was recorded"}`;
}

/** A delivery that did not settle as an error with its reason, so the exit code follows §9 (1 for every delivery reason). */
export function outcomeError(r: Receipt): HermesError | undefined {
  if (r.state === "settled") return undefined;
  const reason = r.reason && isErrorReason(r.reason) ? r.reason : "unknown";
  return new HermesError(reason, outcomeText(r), { data: { delivery_id: r.delivery_id, state: r.state } });
}

export function registerMessageCommand(program: Command, run: CommandRunner): void {
  program
    .command("message <target> <text>")
    .description("message_agent on behalf of the bot given with -p: prints the delivery id (--wait: the outcome)")
    .option("--wait", "wait for the delivery to end and print the reply (exit code from the outcome)")
    .option("--ttl <seconds>", "how long the message may wait for its first attempt (default: the gateway's, 900 s)")
    .option("--id <delivery-id>", "idempotency key: sending the same id and text again does not send twice")
    .action(
      run(async (ctx, target: string, text: string, o: { wait?: boolean; ttl?: string; id?: string }) => {
        if (!ctx.profile) throw new HermesError("invalid_params", "which bot sends it? pass -p NAME (hermes profile list shows them)");
        const ttl = o.ttl === undefined ? 0 : Number(o.ttl);
        if (!Number.isInteger(ttl) || ttl < 0)
          throw new HermesError("invalid_params", `--ttl must be a whole number of seconds, got ${o.ttl}`);
        const client = ctx.client(DeliveryServiceClient);
        const waitMs = o.wait ? ((ttl || 900) + 3600) * 1000 : 60_000;
        const reply = await ctx.call(
          client,
          client.sendMessage,
          { profile: ctx.profile, target, message: text, ttl_seconds: ttl, delivery_id: o.id ?? "", wait: o.wait ?? false },
          waitMs,
        );
        if (!o.wait || !reply.receipt) {
          emit(ctx.json, { status: reply.status, delivery_id: reply.delivery_id }, () => reply.delivery_id);
          return;
        }
        const receipt = reply.receipt;
        const failure = outcomeError(receipt);
        if (ctx.json) emit(true, receiptJson(receipt), () => "");
        else if (!failure) emit(false, undefined, () => outcomeText(receipt));
        if (failure) throw failure;
      }),
    );
}
