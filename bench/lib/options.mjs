// The command lines of the benchmarks: `--help` shows what a script does and its options; an
// unknown or malformed option, or a bad number, stops the run with what was wrong (exit 2).
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

/**
 * `parseArgs` of the script at `scriptUrl` with its `options` and `--help`/`-h`: help prints the
 * script's opening comment and the options with their defaults, and exits 0.
 */
export function benchOptions(scriptUrl, options) {
  let values;
  try {
    ({ values } = parseArgs({ options: { ...options, help: { type: "boolean", short: "h", default: false } } }));
  } catch (err) {
    process.stderr.write(`${err.message}\nrun with --help to see the options\n`);
    process.exit(2);
  }
  if (values.help) {
    process.stdout.write(usage(scriptUrl, options));
    process.exit(0);
  }
  return values;
}

function usage(scriptUrl, options) {
  const lines = readFileSync(fileURLToPath(scriptUrl), "utf8").split("\n");
  const intro = [];
  for (const line of lines.slice(lines[0]?.startsWith("#!") ? 1 : 0)) {
    if (!line.startsWith("//")) break;
    intro.push(line.replace(/^\/\/ ?/, ""));
  }
  const flags = Object.entries(options).map(([name, spec]) => {
    const flag = spec.type === "boolean" ? `--${name}` : `--${name} <value>`;
    const value = spec.default === undefined || spec.default === false ? "" : `  (default ${spec.default})`;
    return `  ${flag}${value}`;
  });
  return [...intro, "", "options:", ...flags, "  --help, -h", ""].join("\n");
}

/** `--name` of the parsed options as an integer ≥ `min`. */
export function intOption(opts, name, min = 1) {
  const n = Number(opts[name]);
  if (!Number.isInteger(n) || n < min) {
    process.stderr.write(`--${name} must be an integer ≥ ${min} (got ${opts[name]})\n`);
    process.exit(2);
  }
  return n;
}
