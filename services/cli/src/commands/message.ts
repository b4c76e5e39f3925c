import { HermesError, isErrorReason } from "@hermes/common/client";
import { isReceiptState, isTerminal } from "@hermes/contract";
import { DeliveryServiceClient, type Receipt } from "@hermes/proto/hermes/v1/delivery";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
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

/** A receipt as JSON: every field present, unset ones as null (what `deliveries show --json` prints). */
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

/** The completion notification a bot would get in its Bot Chat. */
export function outcomeText(r: Receipt): string {
  if (r.state === "settled") return r.reply ?? "";
  if (r.state === "cancelled") return `Delivery to ${r.target} was cancelled: ${r.error ?? "cancelled"}`;
  if (r.state === "queued" || r.state === "claimed") return `Delivery to ${r.target} is ${r.state}`;
  return `Delivery to ${r.target} failed [reason: ${r.reason ?? "unknown"}]: ${r.error ?? "no error text was recorded"}`;
}

/** A delivery that did not settle as an error with its reason, so the command exits 1 (every delivery reason is a runtime failure). */
export function outcomeError(r: Receipt): HermesError | undefined {
  if (r.state === "settled") return undefined;
  const reason = r.reason && isErrorReason(r.reason) ? r.reason : "unknown";
  return new HermesError(reason, outcomeText(r), { data: { delivery_id: r.delivery_id, state: r.state } });
}

/** How often `message --wait` looks at the receipt. */
const POLL_MS = 500;

/** One progress line on stderr: what state the delivery is in (a JSON object with --json). */
function reportProgress(json: boolean, r: Pick<Receipt, "delivery_id" | "state" | "attempts" | "target">): void {
  if (json) {
    process.stderr.write(`${JSON.stringify({ progress: { delivery_id: r.delivery_id, state: r.state, attempts: r.attempts } })}\n`);
  } else {
    process.stderr.write(`delivery ${r.delivery_id} to ${r.target}: ${r.state}${r.attempts > 0 ? ` (attempt ${r.attempts})` : ""}\n`);
  }
}

/**
 * Follows a delivery until it ends, reporting each change of state or attempt on stderr, so a
 * target that hangs shows where it hangs instead of a silent wait of up to the TTL.
 */
async function followDelivery(ctx: CliContext, client: DeliveryServiceClient, first: Receipt, waitMs: number): Promise<Receipt> {
  const deadline = Date.now() + waitMs;
  let shown = `${first.state}/${first.attempts}`;
  let receipt = first;
  // Until it ends (a state this build does not know ends the wait too: the receipt is shown as it is).
  while (isReceiptState(receipt.state) && !isTerminal(receipt.state)) {
    if (Date.now() > deadline) {
      throw new HermesError(
        "timeout",
        `delivery ${receipt.delivery_id} is still ${receipt.state} after ${Math.round(waitMs / 1000)} s; it goes on. Check it with: hermes deliveries show ${receipt.delivery_id}`,
        { data: { delivery_id: receipt.delivery_id, state: receipt.state } },
      );
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    receipt = await ctx.call(client, client.getDelivery, { delivery_id: receipt.delivery_id });
    const now = `${receipt.state}/${receipt.attempts}`;
    if (now !== shown) reportProgress(ctx.json, receipt);
    shown = now;
  }
  return receipt;
}

export function registerMessageCommand(program: Command, run: CommandRunner): void {
  program
    .command("message <target> <text>")
    .description("message_agent on behalf of the bot given with -p: prints the delivery id (--wait: the outcome)")
    .option(
      "--wait",
      "wait for the delivery to end and print the reply (exit code from the outcome); its id and each state change go to stderr",
    )
    .option("--ttl <seconds>", "how long the message may wait for its first attempt (default: the gateway's, 900 s)")
    .option("--id <delivery-id>", "idempotency key: sending the same id and text again does not send twice")
    .action(
      run(async (ctx, target: string, text: string, o: { wait?: boolean; ttl?: string; id?: string }) => {
        if (!ctx.profile) throw new HermesError("invalid_params", "which bot sends it? pass -p NAME (hermes profile list shows them)");
        const ttl = o.ttl === undefined ? 0 : Number(o.ttl);
        if (!Number.isInteger(ttl) || ttl < 0)
          throw new HermesError("invalid_params", `--ttl must be a whole number of seconds, got ${o.ttl}`);
        const client = ctx.client(DeliveryServiceClient);
        const reply = await ctx.call(client, client.sendMessage, {
          profile: ctx.profile,
          target,
          message: text,
          ttl_seconds: ttl,
          delivery_id: o.id ?? "",
          wait: false,
        });
        if (!o.wait) {
          emit(ctx.json, { status: reply.status, delivery_id: reply.delivery_id }, () => reply.delivery_id);
          return;
        }
        // The id at once (the wait may be long), then every change until the delivery ends.
        const first = await ctx.call(client, client.getDelivery, { delivery_id: reply.delivery_id });
        reportProgress(ctx.json, first);
        const receipt = await followDelivery(ctx, client, first, ((ttl || 900) + 3600) * 1000);
        const failure = outcomeError(receipt);
        if (ctx.json) emit(true, receiptJson(receipt), () => "");
        else if (!failure) emit(false, undefined, () => outcomeText(receipt));
        if (failure) throw failure;
      }),
    );
}
