import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { eventually } from "../../../test/support/eventually.js";
import {
  assertBuilt,
  type CliResult,
  type GatewayProcess,
  hermes,
  removeHome,
  startGatewayProcess,
  tempHome,
} from "./support/cli-harness.js";

/**
 * Bot Mode from the command line, as subprocesses of the built CLI: `profile set` with the
 * metadata flags, `profile show/list`, `sections …` and `cron …`, first on the files with no
 * gateway, then through a running gateway whose routine fires every second. Waits are bounded polls.
 */

const homes: string[] = [];
function newHome(): string {
  const home = tempHome();
  homes.push(home);
  return home;
}

beforeAll(() => assertBuilt());
afterAll(() => {
  for (const h of homes) removeHome(h);
});

async function ok(args: string[], home: string): Promise<CliResult> {
  const r = await hermes(args, { home });
  expect(r.stderr, `hermes ${args.join(" ")}`).toBe("");
  expect(r.code, `hermes ${args.join(" ")}`).toBe(0);
  return r;
}

async function json<T = Record<string, unknown>>(args: string[], home: string): Promise<T> {
  return JSON.parse((await ok(["--json", ...args], home)).stdout) as T;
}

/** Runs a command that must fail with `code`, its message naming what is wrong. */
async function refused(args: string[], home: string, code: number, message: RegExp): Promise<void> {
  const r = await hermes(args, { home });
  expect(r.code, `hermes ${args.join(" ")}: ${r.stderr}`).toBe(code);
  expect(r.stderr).toMatch(message);
  expect(r.stdout).toBe("");
}

/** Polls a CLI command's check; each check runs a process, so the bound is generous. */
function poll<T>(check: () => Promise<T>): Promise<Exclude<T, false>> {
  return eventually(check, { timeoutMs: 20_000, intervalMs: 50 });
}

interface RunJson {
  run_id: string;
  state: string;
  trigger?: string;
  scheduled_for?: string;
  started_at?: string;
  reason?: string;
  reply?: string;
}

/** Each command is a process that loads the gateway package: generous on a busy machine. */
const SLOW = { timeout: 240_000 };

describe("with no gateway: the CLI edits the files", () => {
  it("profile set with metadata flags; profile show and list show it; bad values are refused naming the field", SLOW, async () => {
    const home = newHome();
    await ok(["profile", "create", "alice", "--title", "Researcher"], home);
    await ok(["sections", "create", "Clients"], home);
    const set = await ok(
      ["profile", "set", "alice", "--display-name", "Alice 🤖", "--hidden", "--section", "clients", "--avatar-seed", "r1", "--lock-face"],
      home,
    );
    expect(set.stdout).toMatch(/^✓ alice updated\n/);
    expect(set.stdout).toContain("hidden:        yes (display only)");
    const yaml = parseYaml(readFileSync(join(home, "profiles", "alice", "profile.yaml"), "utf8")) as Record<string, unknown>;
    expect(yaml).toMatchObject({ display_name: "Alice 🤖", hidden: true, avatar: { seed: "r1", locked: true } });

    const shown = await ok(["profile", "show", "alice"], home);
    expect(shown.stdout).toMatch(/^section: {7}Clients \(sec_[0-9a-f]+\)$/m);
    expect(shown.stdout).toContain('avatar:        blob, drawn from "r1", locked');
    const list = await ok(["profile", "list"], home);
    expect(list.stdout).toMatch(/^alice\s+Alice 🤖\s+Researcher\s+local\s+local\s+Clients\s+yes$/m);
    const { profiles } = await json<{ profiles: { name: string; meta: { hidden: boolean; section_name: string } }[] }>(
      ["profile", "list"],
      home,
    );
    expect(profiles.find((p) => p.name === "alice")?.meta).toMatchObject({ hidden: true, section_name: "Clients" });

    const back = await json<{ meta: { hidden: boolean; section: string } }>(
      ["profile", "set", "alice", "--no-hidden", "--no-section", "--title", "Lead"],
      home,
    );
    expect(back).toMatchObject({ title: "Lead", meta: { hidden: false, section: "" } });

    await refused(["profile", "set", "alice", "--avatar-style", "photo"], home, 2, /avatar\.style: must be one of blob, geometric, image/);
    await refused(["profile", "set", "alice", "--ui-meta", "{nope"], home, 2, /--ui-meta: is not JSON/);
    await refused(["profile", "set", "alice", "--ui-meta", "[1]"], home, 2, /ui_meta: must be a JSON object/);
    await refused(
      ["profile", "set", "alice", "--ui-meta", JSON.stringify({ big: "x".repeat(17_000) })],
      home,
      2,
      /ui_meta: is \d+ bytes serialized; it must be a JSON object of at most 16384 bytes/,
    );
    await refused(["profile", "set", "alice", "--display-name", "x".repeat(65)], home, 2, /display_name: is 65 characters/);
    await refused(
      ["profile", "set", "alice", "--section", "Nowhere"],
      home,
      1,
      /section "Nowhere" does not exist; list sections with: hermes sections list/,
    );
    await refused(["profile", "set", "alice"], home, 2, /nothing to set: pass one of --provider, .*--section/);
  });

  it("sections list, create, rename, move, reorder, delete", SLOW, async () => {
    const home = newHome();
    await ok(["profile", "create", "bob"], home);
    expect((await ok(["sections", "list"], home)).stdout).toContain("no sections");
    await ok(["sections", "create", "Team"], home);
    await ok(["sections", "create", "Ops", "--index", "0"], home);
    await ok(["profile", "set", "bob", "--section", "Team"], home);
    expect((await ok(["sections", "list"], home)).stdout).toMatch(/^0\s+sec_\S+\s+Ops\s+-\n1\s+sec_\S+\s+Team\s+bob$/m);
    expect((await ok(["sections", "rename", "team", "Crew"], home)).stdout).toMatch(/^✓ section sec_\S+ is now Crew$/m);
    const moved = await json<{ sections: { name: string }[] }>(["sections", "move", "Crew", "0"], home);
    expect(moved.sections.map((s) => s.name)).toEqual(["Crew", "Ops"]);
    const reordered = await json<{ sections: { name: string }[] }>(["sections", "reorder", "Ops", "Crew"], home);
    expect(reordered.sections.map((s) => s.name)).toEqual(["Ops", "Crew"]);
    const deleted = await ok(["sections", "delete", "Crew"], home);
    expect(deleted.stdout).toMatch(/^✓ deleted section Crew \(sec_\S+\); bob is Unassigned now$/m);
    expect((await ok(["profile", "show", "bob"], home)).stdout).toContain("section:       Unassigned");

    await refused(["sections", "delete", "Crew"], home, 1, /section "Crew" does not exist/);
    await refused(["sections", "create", "ops"], home, 2, /name: a section named "Ops" already exists/);
    await refused(["sections", "move", "Ops", "x"], home, 2, /index: must be a whole number from 0 to 0/);
    await refused(["sections", "reorder", "Ops", "Ops"], home, 2, /order: .* is listed twice/);
  });

  it(
    "cron add refuses bad schedules, zones, policies, names and prompt files (exit 2 naming the field); list, pause, resume, remove",
    SLOW,
    async () => {
      const home = newHome();
      await ok(["profile", "create", "carl"], home);
      const add = (...flags: string[]) => ["cron", "add", "--profile", "carl", "--name", "Bad", ...flags];
      const added = await ok(
        [
          "cron",
          "add",
          "--profile",
          "carl",
          "--name",
          "Morning",
          "--schedule",
          "0 8 * * 1-5",
          "--prompt",
          "Summarize my inbox.",
          "--tz",
          "europe/berlin",
        ],
        home,
      );
      expect(added.stdout).toMatch(/^✓ added \[bot:carl\] Morning\n/);
      expect(added.stdout).toContain("schedule:  0 8 * * 1-5 (Europe/Berlin); misfire skip, grace 300 s");
      expect(added.stdout).toContain("no gateway is running on this home");

      await refused(
        add("--schedule", "0 8 * *", "--prompt", "p"),
        home,
        2,
        /schedule: "0 8 \* \*" has 4 fields; it must be 5 fields \(minute hour/,
      );
      await refused(
        add("--schedule", "99 * * * *", "--prompt", "p"),
        home,
        2,
        /schedule: "99 \* \* \* \*" is not valid: .*; it must be 5 fields/,
      );
      await refused(
        add("--schedule", "@hourly", "--prompt", "p"),
        home,
        2,
        /schedule: "@hourly" is a nickname; write the fields instead \(@hourly is "0 \* \* \* \*"\)/,
      );
      await refused(
        add("--schedule", "0 8 * * *", "--prompt", "p", "--tz", "Moon/Base"),
        home,
        2,
        /tz: "Moon\/Base" is not a known time zone; it must be an IANA time zone name/,
      );
      await refused(add("--schedule", "0 8 * * *", "--prompt", "p", "--tz", "UTC+1"), home, 2, /tz: "UTC\+1" is a UTC offset, not a zone/);
      await refused(
        add("--schedule", "0 8 * * *", "--prompt", "p", "--misfire", "always"),
        home,
        2,
        /misfire: must be one of skip, run-once \(got text "always"\)/,
      );
      await refused(
        add("--schedule", "0 8 * * *", "--prompt", "p", "--grace", "soon"),
        home,
        2,
        /grace: must be a whole number of seconds from 1 to 86400/,
      );
      await refused(
        ["cron", "add", "--profile", "carl", "--name", "Morning", "--schedule", "0 9 * * *", "--prompt", "p"],
        home,
        2,
        /name: \[bot:carl\] Morning already exists/,
      );
      await refused(
        ["cron", "add", "--profile", "carl", "--name", "morning", "--schedule", "0 9 * * *", "--prompt", "p"],
        home,
        2,
        /already exists/,
      );
      await refused(add("--schedule", "0 8 * * *"), home, 2, /give the routine's prompt once: --prompt TEXT or --prompt-file FILE/);
      await refused(
        ["cron", "add", "--name", "X", "--schedule", "0 8 * * *", "--prompt", "p"],
        home,
        2,
        /profile: give the bot the routine belongs to/,
      );
      await refused(
        ["cron", "add", "--profile", "carl", "--schedule", "0 8 * * *", "--prompt", "p"],
        home,
        2,
        /required option '--name <name>'/,
      );

      const missing = join(home, "nope.md");
      await refused(
        ["cron", "add", "--profile", "carl", "--name", "F", "--schedule", "0 8 * * *", "--prompt-file", missing],
        home,
        1,
        /prompt file .*nope\.md: does not exist/,
      );
      const big = join(home, "big.md");
      writeFileSync(big, "x".repeat(16_001));
      await refused(
        ["cron", "add", "--profile", "carl", "--name", "F", "--schedule", "0 8 * * *", "--prompt-file", big],
        home,
        2,
        /prompt file .*big\.md: is 16,001 characters; the limit is 16,000/,
      );
      const huge = join(home, "huge.md");
      writeFileSync(huge, "x".repeat(70_000));
      await refused(
        ["cron", "add", "--profile", "carl", "--name", "F", "--schedule", "0 8 * * *", "--prompt-file", huge],
        home,
        2,
        /prompt file .*huge\.md: is over 64,000 bytes/,
      );
      const dir = join(home, "adir");
      mkdirSync(dir);
      await refused(
        ["cron", "add", "--profile", "carl", "--name", "F", "--schedule", "0 8 * * *", "--prompt-file", dir],
        home,
        2,
        /is a directory, not a file/,
      );
      const good = join(home, "prompt.md");
      writeFileSync(good, "Plan the week.\nBe brief.\n");
      const fromFile = await json<{ prompt: string }>(
        ["cron", "add", "--profile", "carl", "--name", "Weekly", "--schedule", "0 9 * * 1", "--prompt-file", good],
        home,
      );
      expect(fromFile.prompt).toBe("Plan the week.\nBe brief.\n");

      const listed = await ok(["cron", "list"], home);
      expect(listed.stdout).toMatch(/^JOB\s+SCHEDULE\s+TZ\s+NEXT RUN\s+STATE\s+LAST$/m);
      expect(listed.stdout).toMatch(/^\[bot:carl\] Morning\s+0 8 \* \* 1-5\s+Europe\/Berlin\s+\d{4}-\d\d-\d\dT\S+\s+active\s+-$/m);
      expect((await ok(["cron", "pause", "[bot:carl] Morning"], home)).stdout).toBe("✓ paused [bot:carl] Morning\n");
      const paused = await json<{ routines: { job: string; paused: boolean; next_run?: string }[] }>(
        ["cron", "list", "--profile", "carl"],
        home,
      );
      expect(paused.routines.find((r) => r.job === "[bot:carl] Morning")).toMatchObject({ paused: true });
      expect(paused.routines.find((r) => r.job === "[bot:carl] Morning")).not.toHaveProperty("next_run");
      expect((await ok(["cron", "resume", "[bot:carl] Morning"], home)).stdout).toMatch(/^✓ resumed \[bot:carl\] Morning; next run \d{4}-/);
      expect((await ok(["cron", "runs", "[bot:carl] Morning"], home)).stdout).toBe("no runs yet\n");
      await refused(["cron", "run-now", "[bot:carl] Morning"], home, 1, /run-now runs the routine in the gateway: start it/);
      await refused(["cron", "pause", "carl Morning"], home, 2, /is not a routine; routines are named '\[bot:<profile>\] <name>'/);
      await refused(["cron", "pause", "[bot:carl] Evening"], home, 1, /no routine \[bot:carl\] Evening; list them with: hermes cron list/);
      await refused(["cron", "runs", "[bot:carl] Morning", "--limit", "500"], home, 2, /limit: must be a whole number from 1 to 200/);
      expect((await ok(["cron", "remove", "[bot:carl] Morning"], home)).stdout).toBe("✓ removed [bot:carl] Morning (0 runs of history)\n");
      expect((await json<{ routines: { job: string }[] }>(["cron", "list"], home)).routines.map((r) => r.job)).toEqual([
        "[bot:carl] Weekly",
      ]);
    },
  );
});

describe("through a running gateway", () => {
  let home: string;
  let gw: GatewayProcess;

  beforeAll(async () => {
    home = newHome();
    await ok(["profile", "create", "alice", "--title", "Researcher"], home);
    gw = await startGatewayProcess(home);
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it("a routine firing every second lands in the bot's chat; pause, run-now, runs, remove", SLOW, async () => {
    const job = "[bot:alice] Tick";
    const added = await json<{ job: string; tz: string; next_run: string }>(
      [
        "cron",
        "add",
        "--profile",
        "alice",
        "--name",
        "Tick",
        "--schedule",
        "* * * * * *",
        "--prompt",
        "Say tick.",
        "--tz",
        "UTC",
        "--misfire",
        "run-once",
        "--grace",
        "30",
      ],
      home,
    );
    expect(added).toMatchObject({ job, tz: "UTC", misfire: "run-once", grace_seconds: 30 });
    const runs = await poll(async () => {
      const { runs } = await json<{ runs: RunJson[] }>(["cron", "runs", job], home);
      expect(runs.some((r) => r.state === "settled")).toBe(true);
      return runs;
    });
    const settled = runs.find((r) => r.state === "settled")!;
    expect(settled).toMatchObject({ trigger: "schedule" });
    expect(settled.reply).toContain("Routine [bot:alice] Tick scheduled for");
    expect((await ok(["cron", "pause", job], home)).stdout).toBe(`✓ paused ${job}\n`);

    // The run is a turn of alice's canonical Bot Chat: a chat with her has it in context.
    const chat = await ok(["-p", "alice", "chat", "-q", "what was my last message?"], home);
    expect(chat.stdout).toMatch(
      /^You said: "Routine \[bot:alice\] Tick scheduled for \d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)? UTC:\nSay tick\."\.\n$/,
    );

    const { routines } = await json<{ routines: { job: string; paused: boolean; last_run?: RunJson }[] }>(["cron", "list"], home);
    expect(routines[0]).toMatchObject({ job, paused: true });
    expect(routines[0]!.last_run?.state).toMatch(/settled|running/);
    const table = await ok(["cron", "runs", job, "--limit", "1"], home);
    expect(table.stdout).toMatch(
      /^SCHEDULED FOR\s+STARTED AT\s+STATE\s+REASON\s+REPLY \/ ERROR\n\d{4}-\S+\s+\d{4}-\S+\s+(settled|running)\s+-\s+/,
    );

    // After the last scheduled run has ended, run-now starts one more, manual.
    await poll(async () => {
      const { runs } = await json<{ runs: RunJson[] }>(["cron", "runs", job, "--limit", "1"], home);
      expect(runs[0]!.state).not.toBe("running");
    });
    const started = await ok(["cron", "run-now", job], home);
    expect(started.stdout).toMatch(
      /^✓ started run rrun_[0-9a-f]+ of \[bot:alice\] Tick; follow it with: hermes cron runs '\[bot:alice\] Tick'\n$/,
    );
    const manual = await poll(async () => {
      const { runs } = await json<{ runs: RunJson[] }>(["cron", "runs", job, "--limit", "1"], home);
      expect(runs[0]).toMatchObject({ trigger: "manual", state: "settled" });
      return runs[0]!;
    });
    expect(manual.scheduled_for).toBeUndefined();
    expect(manual.reply).toContain("Routine [bot:alice] Tick (run now):");

    const removed = await json<{ runs_deleted: number }>(["cron", "remove", job], home);
    expect(removed.runs_deleted).toBeGreaterThanOrEqual(2);
    await refused(["cron", "runs", job], home, 1, /no routine \[bot:alice\] Tick/);
  });

  it("metadata and sections go through the gateway", SLOW, async () => {
    await ok(["sections", "create", "Desk"], home);
    const updated = await json<{ display_name: string; meta: { section_name: string } }>(
      ["profile", "set", "alice", "--display-name", "Ally", "--section", "Desk"],
      home,
    );
    expect(updated).toMatchObject({ display_name: "Ally", meta: { section_name: "Desk" } });
    // The running gateway's next turn speaks with the new name.
    expect((await ok(["-p", "alice", "chat", "-q", "who are you?"], home)).stdout).toBe("I'm Ally (Researcher), @alice.\n");
    await refused(
      ["profile", "set", "alice", "--hidden", "--avatar-silhouette", "star"],
      home,
      2,
      /avatar\.silhouette: must be one of round, organic, boxy, nub, cloud, sun/,
    );
    expect((await ok(["sections", "delete", "Desk"], home)).stdout).toMatch(/alice is Unassigned now/);
  });
});
