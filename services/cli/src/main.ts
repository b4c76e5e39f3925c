import { Command, CommanderError, Option } from "commander";
import { registerChatCommand } from "./commands/chat.js";
import { registerCronCommands } from "./commands/cron.js";
import { registerDeliveriesCommands } from "./commands/deliveries.js";
import { registerGatewayCommands } from "./commands/gateway.js";
import { registerGroupsCommands } from "./commands/groups.js";
import { registerMessageCommand } from "./commands/message.js";
import { registerOpsCommands } from "./commands/ops.js";
import { registerPeerCommands } from "./commands/peer.js";
import { registerPlatformsCommands } from "./commands/platforms.js";
import { registerProfileCommands } from "./commands/profile.js";
import { registerRelayCommands } from "./commands/relay.js";
import { registerSectionsCommands } from "./commands/sections.js";
import { registerUpCommand } from "./commands/up.js";
import { CliContext, type GlobalOptions } from "./context.js";
import { reportError } from "./output.js";

export const VERSION = "0.1.0";

const EXIT_CODES_HELP = `
Exit codes (every command):
  0  success
  1  runtime, peer or transport failure: a gateway or peer that cannot be reached or does not
     answer in time, a turn or delivery that failed, a peer with no key configured or one that
     refuses the key we hold for it (fix the peer or its stored key, or retry)
  2  usage error or refusal: bad arguments, an invalid config, a request the gateway refused
     (no or a wrong --key, a name in use, a missing --confirm); the message says what to do
  hermes check exits as a monitoring plugin: 0 ok, 1 warning, 2 critical, 3 unknown`;

// biome-ignore lint/suspicious/noExplicitAny: commander passes positional arguments untyped
type Action = (ctx: CliContext, ...args: any[]) => Promise<void>;
// biome-ignore lint/suspicious/noExplicitAny: see above
export type CommandRunner = (action: Action) => (...args: any[]) => Promise<void>;

/** Wraps an action: builds the context from the global options and turns errors into exit codes. */
function runner(exit: { code: number }): CommandRunner {
  return (action) =>
    async (...args) => {
      const command = args[args.length - 1] as Command;
      const globals = command.optsWithGlobals() as GlobalOptions;
      let ctx: CliContext | undefined;
      try {
        ctx = new CliContext(globals);
        await action(ctx, ...args.slice(0, -1));
      } catch (err) {
        exit.code = reportError(err, ctx?.json ?? globals.json ?? false);
      } finally {
        ctx?.close();
      }
    };
}

export function buildProgram(exit: { code: number }): Command {
  const program = new Command("hermes")
    .description("Hermes Mesh: gateways, replicated rooms, bot-to-bot delivery and relay for Hermes bots")
    .version(VERSION, "-V, --version")
    // Without --home, defaultHomePath reads HERMES_HOME (a blank one is not set): not commander's
    // .env(), which would hand a blank variable over as a blank --home.
    .option("--home <dir>", "HERMES_HOME (default ~/.hermes) (env: HERMES_HOME)")
    .addOption(
      new Option("--gateway <url>", "gateway gRPC URL (grpc://host:port); default: the control socket of --home").env("HERMES_GATEWAY"),
    )
    .addOption(new Option("--key <key>", "API key for --gateway").env("HERMES_KEY"))
    .option("--json", "machine-readable output")
    .option("-p, --profile <name>", "act as this profile")
    .showHelpAfterError("(run with --help for usage)")
    .addHelpText("after", EXIT_CODES_HELP)
    .exitOverride();
  const run = runner(exit);
  registerGatewayCommands(program, run);
  registerProfileCommands(program, run);
  registerSectionsCommands(program, run);
  registerCronCommands(program, run);
  registerChatCommand(program, run);
  registerGroupsCommands(program, run);
  registerRelayCommands(program, run);
  registerMessageCommand(program, run);
  registerDeliveriesCommands(program, run);
  registerPeerCommands(program, run);
  registerPlatformsCommands(program, run);
  registerUpCommand(program, run);
  registerOpsCommands(program, run, exit);
  return program;
}

/** Runs the CLI; resolves to the exit code (0 ok, 1 runtime/peer/transport failure, 2 usage or refusal: EXIT_CODES_HELP). */
export async function main(argv: string[]): Promise<number> {
  const exit = { code: 0 };
  const program = buildProgram(exit);
  for (const c of allCommands(program)) c.exitOverride();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help, --version and `help CMD` exit 0; help shown because a subcommand is missing is a usage error
      // (for `hermes check`, a monitoring plugin, that is UNKNOWN: 3).
      return err.exitCode === 0 ? 0 : commandName(argv) === "check" ? 3 : 2;
    }
    throw err;
  }
  return exit.code;
}

/** Options of the program that take a value (their value is not the command's name). */
const GLOBAL_VALUE_OPTIONS = new Set(["--home", "--gateway", "--key", "-p", "--profile"]);

/** The command a command line names (its first word that is neither an option nor an option's value). */
function commandName(argv: string[]): string | undefined {
  const words = argv.slice(2);
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    if (GLOBAL_VALUE_OPTIONS.has(w)) i++;
    else if (!w.startsWith("-")) return w;
  }
  return undefined;
}

function allCommands(c: Command): Command[] {
  return [c, ...c.commands.flatMap(allCommands)];
}
