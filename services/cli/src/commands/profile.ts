import { createInterface } from "node:readline/promises";
import { HermesError } from "@hermes/common/client";
import type { Profile } from "@hermes/proto/hermes/v1/gateway";
import type { Command } from "commander";
import type { CommandRunner } from "../main.js";
import { emit, table, warn } from "../output.js";
import { profilesBackend } from "../profiles-backend.js";
import { describeMeta, registerProfileSetCommand } from "./profile-set.js";

function describe(p: Profile): string {
  const lines = [
    `name:          ${p.name}${p.is_default ? " (default: HERMES_HOME itself)" : ""}`,
    describeMeta(p),
    `description:   ${p.description || "-"}`,
    `model:         ${p.model} (provider ${p.provider})`,
    `path:          ${p.path}`,
    `bot chat:      ${p.bot_chat_session_id || "-"}`,
  ];
  if (p.aliases.length > 0) lines.push(`former names:  ${p.aliases.join(", ")}`);
  return lines.join("\n");
}

async function confirmByTyping(name: string): Promise<boolean> {
  if (!process.stdin.isTTY) {
    throw new HermesError("refused", `refusing to delete ${name} without confirmation: type the name at the prompt, or pass --yes`);
  }
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(`This deletes profile ${name} and all its data. Type the name to confirm: `);
    return answer.trim() === name;
  } finally {
    rl.close();
  }
}

export function registerProfileCommands(program: Command, run: CommandRunner): void {
  const profile = program
    .command("profile")
    .description("manage profiles (bots): list, show, create, set, rename, delete, migrate-identity");
  registerProfileSetCommand(profile, run);

  profile
    .command("list")
    .description("list profiles")
    .action(
      run(async (ctx) => {
        const backend = await profilesBackend(ctx);
        try {
          const profiles = await backend.list();
          emit(ctx.json, { profiles }, () =>
            table(
              ["NAME", "DISPLAY NAME", "TITLE", "MODEL", "PROVIDER", "SECTION", "HIDDEN"],
              profiles.map((p) => [
                p.name,
                p.display_name,
                p.title || "-",
                p.model,
                p.provider,
                p.meta?.section_name || "-",
                p.meta?.hidden ? "yes" : "-",
              ]),
            ),
          );
        } finally {
          backend.close();
        }
      }),
    );

  profile
    .command("show <name>")
    .description("show one profile (former names resolve too)")
    .action(
      run(async (ctx, name: string) => {
        const backend = await profilesBackend(ctx);
        try {
          const p = await backend.show(name);
          emit(ctx.json, p, () => describe(p));
        } finally {
          backend.close();
        }
      }),
    );

  profile
    .command("create <name>")
    .description("create a profile with its canonical Bot Chat")
    .option("--title <title>", "role shown in rosters")
    .option("--description <text>", "what the bot does")
    .option("--model <model>", "model name as the provider knows it")
    .option("--provider <provider>", "a key of `providers` in config.yaml, or `local`")
    .option("--clone-from <profile>", "start from another profile's config, SOUL.md and .env, with its look (avatar and section)")
    .action(
      run(async (ctx, name: string, o: { title?: string; description?: string; model?: string; provider?: string; cloneFrom?: string }) => {
        const backend = await profilesBackend(ctx);
        try {
          const p = await backend.create(name, {
            ...(o.title !== undefined ? { title: o.title } : {}),
            ...(o.description !== undefined ? { description: o.description } : {}),
            ...(o.model !== undefined ? { model: o.model } : {}),
            ...(o.provider !== undefined ? { provider: o.provider } : {}),
            ...(o.cloneFrom !== undefined ? { clone_from: o.cloneFrom } : {}),
          });
          emit(ctx.json, p, () => `✓ created profile ${p.name} (${p.path})\n  try: hermes -p ${p.name} chat -q "hello"`);
        } finally {
          backend.close();
        }
      }),
    );

  profile
    .command("rename <old> <new>")
    .description("rename a profile and migrate its identity; `rename default <label>` sets only the display name")
    .action(
      run(async (ctx, oldName: string, newName: string) => {
        const backend = await profilesBackend(ctx);
        try {
          const r = await backend.rename(oldName, newName);
          emit(ctx.json, r, () =>
            r.display_name_only
              ? `✓ display name of default is now ${r.profile?.display_name} (the id stays default)`
              : `✓ renamed ${oldName} → ${newName}${r.migration?.ok ? `; identity migrated (${formatCounts(r.migration.counts)})` : ""}`,
          );
          if (r.warning) warn(r.warning);
        } finally {
          backend.close();
        }
      }),
    );

  profile
    .command("migrate-identity <old> <new>")
    .description("retry the identity migration after a rename (idempotent; old need not exist, new must)")
    .action(
      run(async (ctx, oldName: string, newName: string) => {
        const backend = await profilesBackend(ctx);
        try {
          const m = await backend.migrateIdentity(oldName, newName);
          emit(ctx.json, m, () => `✓ session/routing identity migrated: ${oldName} → ${newName} (${formatCounts(m.counts)})`);
        } finally {
          backend.close();
        }
      }),
    );

  profile
    .command("delete <name>")
    .description("delete a profile, its data and identity rows; leaves a tombstone so nothing can recreate it")
    .option("-y, --yes", "do not ask for the name to be typed")
    .action(
      run(async (ctx, name: string, o: { yes?: boolean }) => {
        if (name === "default")
          throw new HermesError("default_profile", "the default profile cannot be deleted (it is HERMES_HOME itself)");
        if (!o.yes && !(await confirmByTyping(name))) throw new HermesError("refused", "the typed name did not match; nothing was deleted");
        const backend = await profilesBackend(ctx);
        try {
          const r = await backend.remove(name);
          emit(ctx.json, r, () => `✓ deleted profile ${r.name} (identity rows: ${formatCounts(r.purged)}; tombstone ${r.tombstone})`);
        } finally {
          backend.close();
        }
      }),
    );
}

function formatCounts(counts: Record<string, number>): string {
  const entries = Object.entries(counts);
  return entries.length === 0 ? "nothing to rewrite" : entries.map(([t, n]) => `${t} ${n}`).join(", ");
}
