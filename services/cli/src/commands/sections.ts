import { HermesError } from "@hermes/common/client";
import type { SectionInfo } from "@hermes/proto/hermes/v1/botmode";
import type { Command } from "commander";
import type { CommandRunner } from "../main.js";
import { emit, table } from "../output.js";
import { type BotModeBackend, botModeBackend } from "../profiles-backend.js";

function listing(sections: SectionInfo[]): string {
  if (sections.length === 0) return "no sections: every bot is in Unassigned (create one: hermes sections create NAME)";
  return table(
    ["#", "ID", "NAME", "BOTS"],
    sections.map((s) => [s.order, s.id, s.name, s.profiles.join(", ") || "-"]),
  );
}

/** A position as typed; the gateway refuses one that is not a whole number in range, naming the range. */
function indexArgument(text: string): number {
  return text.trim() === "" ? Number.NaN : Number(text);
}

export function registerSectionsCommands(program: Command, run: CommandRunner): void {
  const sections = program
    .command("sections")
    .description("roster sections (folders of bots): list, create, rename, move, reorder, delete; file a bot with profile set --section");
  /** Runs one call on the backend and prints its answer. */
  const action = <T>(call: (b: BotModeBackend, ...args: string[]) => Promise<T>, human: (r: T) => string) =>
    run(async (ctx, ...args: string[]) => {
      const backend = await botModeBackend(ctx);
      try {
        const r = await call(backend, ...args);
        emit(ctx.json, r, () => human(r));
      } finally {
        backend.close();
      }
    });

  sections
    .command("list")
    .description("the sections in roster order, with their bots")
    .action(
      action(
        async (b) => ({ sections: await b.sections() }),
        (r) => listing(r.sections),
      ),
    );

  sections
    .command("create <name>")
    .description("a new section (1-64 characters, unique; not Unassigned), at the end or at --index")
    .option("--index <n>", "its position, 0 for the top")
    .action(
      run(async (ctx, name: string, o: { index?: string }) => {
        const backend = await botModeBackend(ctx);
        try {
          const s = await backend.createSection(name, o.index === undefined ? undefined : indexArgument(o.index));
          emit(
            ctx.json,
            s,
            () => `✓ created section ${s.name} (${s.id}); file a bot in it: hermes profile set BOT --section ${JSON.stringify(s.name)}`,
          );
        } finally {
          backend.close();
        }
      }),
    );

  sections
    .command("rename <section> <name>")
    .description("rename a section (by id or name); its bots stay in it")
    .action(
      action(
        (b, section, name) => b.renameSection(section!, name!),
        (s) => `✓ section ${s.id} is now ${s.name}`,
      ),
    );

  sections
    .command("move <section> <index>")
    .description("move one section to a position (0 is the top)")
    .action(
      action(
        async (b, section, index) => ({ sections: await b.moveSection(section!, indexArgument(index!)) }),
        (r) => listing(r.sections),
      ),
    );

  sections
    .command("reorder <sections...>")
    .description("give the whole order, top first: every section once, by id or name")
    .action(
      run(async (ctx, order: string[]) => {
        const backend = await botModeBackend(ctx);
        try {
          const r = { sections: await backend.reorderSections(order) };
          emit(ctx.json, r, () => listing(r.sections));
        } finally {
          backend.close();
        }
      }),
    );

  sections
    .command("delete <section>")
    .description("delete a section; never a bot: its bots return to Unassigned")
    .action(
      action(
        (b, section) => b.deleteSection(section!),
        (r) => {
          if (r.removed === undefined) throw new HermesError("internal", "the gateway answered no section");
          const bots =
            r.unassigned.length === 0
              ? "it held no bots"
              : `${r.unassigned.join(", ")} ${r.unassigned.length === 1 ? "is" : "are"} Unassigned now`;
          return `✓ deleted section ${r.removed.name} (${r.removed.id}); ${bots}`;
        },
      ),
    );
}
