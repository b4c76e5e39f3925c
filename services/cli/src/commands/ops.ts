import { HermesError } from "@hermes/common/client";
import {
  CHECK_EXIT_CODES,
  type CheckReport,
  checkReportPrometheus,
  isWaitCondition,
  type MeshStatus,
  WAIT_CONDITIONS,
  waitConditionMet,
} from "@hermes/gateway/ops";
import { OpsServiceClient } from "@hermes/proto/hermes/v1/ops";
import { RoomServiceClient } from "@hermes/proto/hermes/v1/rooms";
import type { Command } from "commander";
import { bashCompletion, zshCompletion } from "../completion.js";
import type { CliContext } from "../context.js";
import type { CommandRunner } from "../main.js";
import { emit, table } from "../output.js";

/**
 * Operator commands in the manner of etcdctl endpoint status, nats server check and kubectl wait:
 * `hermes status` (the mesh as the gateway sees it), `hermes wait room`, `hermes check` (Nagios
 * exit codes) and `hermes console link`. The first three read one data model, the gateway's
 * `mesh.status` (services/gateway/src/ops/core), which the console's Mesh view draws too.
 */

/** Calls a method of the gateway's ops method table (OpsService.Call). */
export async function callOps<T>(ctx: CliContext, method: string, params: Record<string, unknown> = {}, timeoutMs?: number): Promise<T> {
  const client = ctx.client(OpsServiceClient);
  const answer = await ctx.call(client, client.call, { method, params_json: JSON.stringify(params) }, timeoutMs);
  return JSON.parse(answer.result_json) as T;
}

function uptime(seconds: number | null): string {
  if (seconds === null) return "-";
  if (seconds < 120) return `${Math.round(seconds)}s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m`;
  return `${Math.round(seconds / 3600)}h`;
}

/** `hermes status` for humans: gateways, the relay link and the coordinator, then one line per room copy. */
export function describeMesh(s: MeshStatus): string {
  const gateways = table(
    ["GATEWAY", "URL", "REACHABLE", "VERSION", "UPTIME", "RELAY LINK", "LEADS"],
    s.gateways.map((g) => [
      `${g.gateway_id}${g.via === "self" ? " (this)" : ""}`,
      g.url ?? (g.via === "relay" ? "(via relay)" : "-"),
      g.reachable ? "yes" : `no${g.error ? `: ${g.error}` : ""}`,
      g.version ?? "-",
      uptime(g.uptime_seconds),
      g.relay_state ?? "-",
      g.leads.join(", ") || "-",
    ]),
  );
  const relay = `relay: ${s.relay ? `${s.relay.url} ${s.relay.state} (connection ${s.relay.connection}, roster epoch ${s.relay.roster_epoch})` : "none"}`;
  const coordinator = `coordinator: ${s.coordinator ? `${s.coordinator.state}${s.coordinator.endpoints.length > 0 ? ` (${s.coordinator.endpoints.join(", ")})` : ""}` : "none"}`;
  const rows = s.rooms.flatMap((r) =>
    r.copies.map((c) => [
      r.room_id,
      c.gateway_id,
      c.role,
      String(c.epoch),
      String(c.stored_seq),
      c.lag === null ? "?" : String(c.lag),
      c.safety_reason ? `${c.safety_status} (${c.safety_reason})` : c.safety_status,
      `${r.authority.gateway_id}@${r.authority.epoch} latest ${r.latest_seq ?? "?"}: ${r.safety}`,
    ]),
  );
  const rooms =
    rows.length === 0
      ? "no rooms"
      : table(["ROOM", "COPY ON", "ROLE", "EPOCH", "SEQ", "LAG", "SAFETY", "ROOM (AUTHORITY, LATEST, SAFETY)"], rows);
  return [gateways, "", relay, coordinator, "", rooms].join("\n");
}

/** What `a2a.status` answers (services/gateway/src/a2a/app/a2a-status.ts). */
export interface A2aStatusJson {
  enabled: boolean;
  index_card_url: string | null;
  cards: { profile: string; name: string; url: string; card_url: string }[];
  active: number;
  tasks: {
    task_id: string;
    profile: string;
    context_id: string;
    caller: string;
    state: string;
    reason: string | null;
    updated_at: string;
  }[];
  peers: { name: string; url: string; key_variable: string; key_set: boolean }[];
}

/** The A2A part of `hermes status`, or null from a gateway that serves none (an older one). */
async function a2aStatus(ctx: CliContext): Promise<A2aStatusJson | null> {
  try {
    return await callOps<A2aStatusJson>(ctx, "a2a.status", { limit: 10 });
  } catch (err) {
    if (err instanceof HermesError && err.reason === "method_not_found") return null;
    throw err;
  }
}

/** `hermes status`'s A2A lines: the cards served, the agents called, the latest tasks. */
export function describeA2a(a: A2aStatusJson | null): string {
  if (!a) return "a2a: not served by this gateway";
  const lines = [
    a.enabled
      ? `a2a: ${a.cards.length} bot card(s), index ${a.index_card_url}; ${a.active} task(s) running`
      : "a2a: serving is off (a2a.enabled: false)",
  ];
  if (a.cards.length > 0)
    lines.push(
      table(
        ["BOT", "NAME", "CARD"],
        a.cards.map((c) => [c.profile, c.name, c.card_url]),
      ),
    );
  if (a.peers.length > 0) {
    lines.push(
      table(
        ["A2A PEER", "URL", "KEY"],
        a.peers.map((p) => [p.name, p.url, `${p.key_variable} ${p.key_set ? "(set)" : "(missing)"}`]),
      ),
    );
  }
  if (a.tasks.length > 0) {
    lines.push(
      table(
        ["TASK", "BOT", "CALLER", "STATE", "UPDATED"],
        a.tasks.map((t) => [t.task_id, t.profile, t.caller, t.reason ? `${t.state} [${t.reason}]` : t.state, t.updated_at]),
      ),
    );
  }
  return lines.join("\n");
}

function seconds(value: string | undefined, flag: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new HermesError("invalid_params", `${flag} must be a number of seconds above 0, got ${value}`);
  return n;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** The options of `hermes check` that set a threshold, and the table field each sets. */
const THRESHOLD_OPTIONS: [flag: string, key: string, field: string, description: string][] = [
  ["--fsync-warning <ms>", "fsyncWarning", "fsync_warning_ms", "write + fsync in HERMES_HOME slower than this warns (default 100)"],
  ["--fsync-critical <ms>", "fsyncCritical", "fsync_critical_ms", "… is critical (default 1000)"],
  ["--disk-warning <percent>", "diskWarning", "disk_warning_percent", "free space at or below this percentage warns (default 10)"],
  ["--disk-critical <percent>", "diskCritical", "disk_critical_percent", "… is critical (default 5)"],
  ["--lag-warning <events>", "lagWarning", "lag_warning_events", "a replica room here this far behind warns (default 100)"],
  ["--lag-critical <events>", "lagCritical", "lag_critical_events", "… is critical (default 10000)"],
  ["--failures-warning <n>", "failuresWarning", "failures_warning", "this many failed deliveries in the window warn (default 1)"],
  ["--failures-critical <n>", "failuresCritical", "failures_critical", "… are critical (default 20)"],
  ["--window <seconds>", "window", "failures_window_seconds", "how far back delivery failures count (default 900)"],
];

/** `hermes check` exits with the Nagios code of its state; any error of its own is UNKNOWN (3), the gateway unreachable CRITICAL (2). */
function checkExitCodeOf(err: unknown): number {
  const e = err instanceof HermesError ? err : undefined;
  if (e && (e.reason === "unavailable" || e.reason === "timeout" || e.reason === "unauthenticated")) return CHECK_EXIT_CODES.critical;
  return CHECK_EXIT_CODES.unknown;
}

export function registerOpsCommands(program: Command, run: CommandRunner, exit: { code: number }): void {
  program
    .command("status")
    .description(
      "the mesh as this gateway sees it: gateways (url, reachable, version, uptime), relay link, coordinator, per room role, epoch, seq, lag per replica, safety; the A2A cards served and the latest A2A tasks",
    )
    .option("--watch", "redraw every 2 s until Ctrl-C (with --json: one JSON document per line)")
    .action(
      run(async (ctx, o: { watch?: boolean }) => {
        if (!o.watch) {
          const s = await callOps<MeshStatus>(ctx, "mesh.status", { fresh: true });
          const a2a = await a2aStatus(ctx);
          emit(ctx.json, { ...s, a2a }, () => `${describeMesh(s)}\n\n${describeA2a(a2a)}`);
          return;
        }
        let stop = false;
        process.once("SIGINT", () => {
          stop = true;
        });
        while (!stop) {
          const s = await callOps<MeshStatus>(ctx, "mesh.status", { fresh: true });
          if (ctx.json) process.stdout.write(`${JSON.stringify(s)}\n`);
          else process.stdout.write(`${process.stdout.isTTY ? "\x1b[2J\x1b[H" : "\n"}${s.observed_at}\n${describeMesh(s)}\n`);
          for (let waited = 0; waited < 2000 && !stop; waited += 100) await sleep(100);
        }
      }),
    );

  const wait = program.command("wait").description("wait until something holds, as kubectl wait (exit 0 when met, 1 on timeout)");
  wait
    .command("room <room>")
    .description(`wait until a room on this gateway meets a condition: ${WAIT_CONDITIONS.join(", ")}`)
    .requiredOption("--for <condition>", `${WAIT_CONDITIONS.join(" | ")}`)
    .option("--timeout <seconds>", "give up after this long (default 60)")
    .action(
      run(async (ctx, roomId: string, o: { for: string; timeout?: string }) => {
        if (!isWaitCondition(o.for)) {
          throw new HermesError("invalid_params", `--for must be one of ${WAIT_CONDITIONS.join(", ")}, got ${o.for}`);
        }
        const condition = o.for;
        const timeoutMs = seconds(o.timeout, "--timeout", 60) * 1000;
        const deadline = Date.now() + timeoutMs;
        const rooms = ctx.client(RoomServiceClient);
        for (;;) {
          const left = deadline - Date.now();
          let now = "no answer yet";
          try {
            const s = await ctx.call(rooms, rooms.replicaState, { room_id: roomId }, Math.max(1000, left));
            const answer = waitConditionMet(condition, s);
            now = answer.now;
            if (answer.met) {
              emit(ctx.json, { room_id: roomId, condition, met: true, now }, () => `${roomId}: ${condition} (${now})`);
              return;
            }
          } catch (err) {
            // A room that is not there yet (a replicate still starting) is waited for; anything else is the answer.
            if (!(err instanceof HermesError && err.reason === "not_found")) throw err;
            now = err.message;
          }
          if (Date.now() >= deadline) {
            throw new HermesError("timeout", `${roomId} did not become ${condition} within ${timeoutMs / 1000} s (now: ${now})`, {
              data: { room_id: roomId, condition },
            });
          }
          await sleep(Math.min(250, Math.max(0, deadline - Date.now())));
        }
      }),
    );

  const check = program
    .command("check")
    .description(
      "this gateway's health with Nagios exit codes (0 ok, 1 warning, 2 critical, 3 unknown): fsync latency, free disk, replica lag, fenced or diverged rooms, relay link, recent delivery failures",
    )
    .option("--prometheus", "print the checks in the Prometheus text format (for a textfile collector)");
  for (const [flag, , , description] of THRESHOLD_OPTIONS) check.option(flag, description);
  check.action(
    run(async (ctx, o: Record<string, string | boolean | undefined>) => {
      try {
        const thresholds: Record<string, number> = {};
        for (const [flag, key, field] of THRESHOLD_OPTIONS) {
          const value = o[key];
          if (value === undefined) continue;
          const n = Number(value);
          if (typeof value !== "string" || !Number.isFinite(n) || n < 0) {
            throw new HermesError("invalid_params", `${flag.split(" ")[0]} must be a number ≥ 0, got ${String(value)}`);
          }
          thresholds[field] = n;
        }
        const report = await callOps<CheckReport>(ctx, "mesh.check", { thresholds }, 30_000);
        if (o.prometheus) process.stdout.write(checkReportPrometheus(report));
        else
          emit(ctx.json, report, () =>
            [
              `HERMES ${report.state.toUpperCase()} - ${report.gateway_id}: ${
                report.checks
                  .filter((c) => c.state !== "ok")
                  .map((c) => `${c.name} ${c.state}`)
                  .join(", ") || "all checks ok"
              }`,
              ...report.checks.map((c) => `  ${c.state.toUpperCase().padEnd(8)} ${c.name.padEnd(11)} ${c.summary}`),
            ].join("\n"),
          );
        exit.code = CHECK_EXIT_CODES[report.state];
      } catch (err) {
        const e = err instanceof HermesError ? err : new HermesError("unknown", (err as Error).message);
        if (o.prometheus) process.stdout.write(`hermes_check_status{check="overall"} ${checkExitCodeOf(e)}\n`);
        process.stderr.write(
          ctx.json
            ? `${JSON.stringify({ error: e.toJSON() })}\n`
            : `HERMES ${checkExitCodeOf(e) === 2 ? "CRITICAL" : "UNKNOWN"} - ${e.message}\n`,
        );
        exit.code = checkExitCodeOf(e);
      }
    }),
  );

  program
    .command("completion <shell>")
    .description("print a completion script: bash (source <(hermes completion bash)) or zsh")
    .action(
      run(async (_ctx, shell: string) => {
        if (shell !== "bash" && shell !== "zsh") throw new HermesError("invalid_params", `shell must be bash or zsh, got ${shell}`);
        process.stdout.write(shell === "bash" ? bashCompletion(program) : zshCompletion(program));
      }),
    );

  program
    .command("console")
    .description("the gateway's web console")
    .command("link")
    .description("print a one-time login link to the console of the gateway serving --home (valid once, for 10 minutes)")
    .action(
      run(async (ctx) => {
        const link = await callOps<{ url: string; expires_at: string }>(ctx, "console.login_link");
        emit(ctx.json, link, () => `${link.url}\n(one login, until ${link.expires_at})`);
      }),
    );
}
