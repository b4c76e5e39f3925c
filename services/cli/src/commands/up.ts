import { resolve } from "node:path";
import { HermesError, keepRunningWithoutOutput } from "@hermes/common/client";
import type { Command } from "commander";
import { folderOption } from "../context.js";
import type { CommandRunner } from "../main.js";
import { MAX_GATEWAYS } from "../up/demo-plan.js";

interface UpOptions {
  gateways?: string;
  dir?: string;
  coordinator?: boolean;
}

export function registerUpCommand(program: Command, run: CommandRunner): void {
  program
    .command("up")
    .description("the local mesh for newcomers: a relay and N gateways as child processes, demo bots and a room; Ctrl-C stops all")
    .option("--gateways <n>", `how many gateways (1-${MAX_GATEWAYS}, default 3)`)
    .option("--dir <dir>", "where their homes live (default ./.hermes-local); reused when it exists")
    .option(
      "--coordinator",
      "also start a local single-node etcd (the etcd binary must be installed) and make the demo room a quorum room that fails over by itself",
    )
    .action(
      run(async (_ctx, o: UpOptions) => {
        const count = o.gateways === undefined ? 3 : Number(o.gateways);
        if (!Number.isInteger(count) || count < 1 || count > MAX_GATEWAYS) {
          throw new HermesError("invalid_params", `--gateways must be a whole number from 1 to ${MAX_GATEWAYS}, got ${o.gateways}`);
        }
        const dir = resolve(o.dir === undefined ? ".hermes-local" : folderOption(o.dir, "--dir"));
        // It supervises its children until Ctrl-C, whether or not anyone still reads what it prints.
        keepRunningWithoutOutput();
        const { up } = await import("../up/mesh.js");
        await up(count, dir, { coordinator: o.coordinator === true });
      }),
    );
}
