// Command-line numbers of the benchmarks: a bad one stops the run with what was wrong (exit 2).

/** `--name` of the parsed options as an integer ≥ `min`. */
export function intOption(opts, name, min = 1) {
  const n = Number(opts[name]);
  if (!Number.isInteger(n) || n < min) {
    process.stderr.write(`--${name} must be an integer ≥ ${min} (got ${opts[name]})\n`);
    process.exit(2);
  }
  return n;
}
