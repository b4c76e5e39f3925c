import { closeSync, openSync, readSync } from "node:fs";
import { HermesError } from "@hermes/common/client";
import type { Routine, RoutineRun } from "@hermes/proto/hermes/v1/botmode";
import type { Command } from "commander";
import type { CommandRunner } from "../main.js";
import { emit, table } from "../output.js";
import { type BotModeBackend, botModeBackend } from "../profiles-backend.js";

interface AddOptions {
  name: string;
  schedule: string;
  prompt?: string;
  promptFile?: string;
  tz?: string;
  misfire?: string;
  grace?: string;
}

/**
 * Reads `--prompt-file` here, on the machine the command runs on, once: the text is stored with the
 * routine, so a run never depends on a file the gateway may not see later. At most the byte limit
 * (+1, to tell a file over it) is read.
 */
async function readPromptFile(path: string): Promise<string> {
  const { PROMPT_FILE_MAX_BYTES, promptFileError, promptFromFile } = await import("@hermes/gateway/direct");
  const buffer = Buffer.alloc(PROMPT_FILE_MAX_BYTES + 1);
  let length = 0;
  try {
    const fd = openSync(path, "r");
    try {
      for (let n = -1; n !== 0 && length < buffer.length; length += n) n = readSync(fd, buffer, length, buffer.length - length, null);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    throw promptFileError(path, (err as NodeJS.ErrnoException).code);
  }
  return promptFromFile(path, buffer.subarray(0, length));
}

/** One line of a routine's last run for `cron list`. */
function lastState(r: Routine): string {
  const last = r.last_run;
  if (last === undefined) return "-";
  const at = last.started_at ?? last.scheduled_for ?? "";
  return `${last.state}${last.reason ? ` (${last.reason})` : ""}${at ? ` ${at}` : ""}`;
}

function oneLine(text: string | undefined, max = 60): string {
  if (!text) return "-";
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

function describeRoutine(r: Routine): string {
  return [
    `job:       ${r.job}`,
    `schedule:  ${r.schedule} (${r.tz}); misfire ${r.misfire}, grace ${r.grace_seconds} s`,
    `state:     ${r.paused ? "paused" : "active"}; next run ${r.next_run ?? "-"}`,
    `last run:  ${lastState(r)}`,
  ].join("\n");
}

export function registerCronCommands(program: Command, run: CommandRunner): void {
  const cron = program
    .command("cron")
    .description("routines: a bot's recurring tasks, named '[bot:<profile>] <name>', whose runs are turns in its Bot Chat");
  /** Runs one call on the backend and prints its answer. */
  const action = <T>(
    call: (b: BotModeBackend, job: string, options: Record<string, string | undefined>) => Promise<T>,
    human: (r: T) => string,
  ) =>
    run(async (ctx, job: string, options: Record<string, string | undefined>) => {
      const backend = await botModeBackend(ctx);
      try {
        const r = await call(backend, job, options);
        emit(ctx.json, r, () => human(r));
      } finally {
        backend.close();
      }
    });

  cron
    .command("add")
    .description(
      "add a routine to the bot given with --profile: --name R --schedule EXPR (--prompt TEXT | --prompt-file FILE); a schedule has 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first)",
    )
    .requiredOption("--name <name>", "the routine's name, unique per bot (1-64 characters)")
    .requiredOption("--schedule <expr>", 'a cron expression, e.g. "0 8 * * 1-5" (08:00 on weekdays) or "*/30 * * * * *" (every 30 s)')
    .option("--prompt <text>", "what the bot is asked on each run (at most 16,000 characters)")
    .option("--prompt-file <file>", "read the prompt from a UTF-8 file, once, now")
    .option("--tz <zone>", "an IANA time zone such as Europe/Berlin (default: the gateway's own zone, stored with the routine)")
    .option("--misfire <policy>", "times missed while the gateway was down: skip (default) or run-once (one catch-up run)")
    .option("--grace <seconds>", "how late a run may still start and count as on time (default 300)")
    .action(
      run(async (ctx, o: AddOptions) => {
        if (ctx.profile === undefined) {
          throw new HermesError("invalid_params", "profile: give the bot the routine belongs to: hermes cron add --profile NAME …", {
            data: { field: "profile" },
          });
        }
        const { promptSource } = await import("@hermes/gateway/direct");
        const prompt =
          promptSource({ prompt: o.prompt, prompt_file: o.promptFile }) === "prompt" ? o.prompt! : await readPromptFile(o.promptFile!);
        const backend = await botModeBackend(ctx);
        try {
          const r = await backend.addRoutine({
            profile: ctx.profile,
            name: o.name,
            schedule: o.schedule,
            tz: o.tz ?? "",
            prompt,
            misfire: o.misfire ?? "",
            // Whatever was typed reaches the gateway's check, which says what is valid.
            grace_seconds: o.grace === undefined ? undefined : o.grace.trim() === "" ? Number.NaN : Number(o.grace),
          });
          const later = backend.live ? "" : "\n  no gateway is running on this home: the routine runs once one is started";
          emit(ctx.json, r, () => `✓ added ${r.job}\n${describeRoutine(r)}${later}`);
        } finally {
          backend.close();
        }
      }),
    );

  cron
    .command("list")
    .description("every routine (or --profile's): job, schedule, next run, last state")
    .action(
      run(async (ctx) => {
        const backend = await botModeBackend(ctx);
        try {
          const routines = await backend.routines(ctx.profile ?? "");
          emit(ctx.json, { routines }, () =>
            routines.length === 0
              ? "no routines (add one: hermes cron add --profile BOT --name NAME --schedule EXPR --prompt TEXT)"
              : table(
                  ["JOB", "SCHEDULE", "TZ", "NEXT RUN", "STATE", "LAST"],
                  routines.map((r) => [r.job, r.schedule, r.tz, r.next_run ?? "-", r.paused ? "paused" : "active", lastState(r)]),
                ),
          );
        } finally {
          backend.close();
        }
      }),
    );

  cron
    .command("pause <job>")
    .description("no more scheduled runs until resumed (a running run finishes); e.g. hermes cron pause '[bot:alice] Morning summary'")
    .action(
      action(
        (b, job) => b.pauseRoutine(job),
        (r) => `✓ paused ${r.job}`,
      ),
    );

  cron
    .command("resume <job>")
    .description("run on schedule again from now (times while paused are not caught up)")
    .action(
      action(
        (b, job) => b.resumeRoutine(job),
        (r) => `✓ resumed ${r.job}; next run ${r.next_run ?? "-"}`,
      ),
    );

  cron
    .command("remove <job>")
    .description("remove a routine and its run history (a running run is cancelled)")
    .action(
      action(
        (b, job) => b.removeRoutine(job),
        (r) => `✓ removed ${r.job} (${r.runs_deleted} run${r.runs_deleted === 1 ? "" : "s"} of history)`,
      ),
    );

  cron
    .command("run-now <job>")
    .description("run a routine once now, paused or not (refused while one of its runs is running); needs the running gateway")
    .action(
      action(
        (b, job) => b.runRoutineNow(job),
        (r) => `✓ started run ${r.run_id} of ${r.job}; follow it with: hermes cron runs '${r.job}'`,
      ),
    );

  cron
    .command("runs <job>")
    .description("a routine's runs, newest first: settled, failed (with its reason), missed, skipped_overlap")
    .option("--limit <n>", "how many (1-200, default 20)")
    .action(
      action(
        async (b, job, o) => ({ runs: await b.routineRuns(job, o["limit"] === undefined ? 0 : Number(o["limit"])) }),
        ({ runs }: { runs: RoutineRun[] }) =>
          runs.length === 0
            ? "no runs yet"
            : table(
                ["SCHEDULED FOR", "STARTED AT", "STATE", "REASON", "REPLY / ERROR"],
                runs.map((r) => [
                  r.scheduled_for ?? "-",
                  r.started_at ?? "-",
                  r.state,
                  r.reason ?? "-",
                  oneLine(r.reply ?? r.error ?? r.detail),
                ]),
              ),
      ),
    );
}
