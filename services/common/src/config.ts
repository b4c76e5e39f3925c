import { existsSync, readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { HermesError } from "./pure/errors.js";

/**
 * Integers are parsed as BigInt so a long unquoted id (a Discord channel id as a map key or value)
 * keeps every digit; values that fit a double become numbers again, longer ones stay exact strings.
 */
function settleBigInts(value: unknown): unknown {
  if (typeof value === "bigint") return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
  if (Array.isArray(value)) return value.map(settleBigInts);
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, settleBigInts(v)]));
  return value;
}

/** Reads a YAML file (missing or empty → {}), refusing YAML syntax errors with the file named. */
export function readYamlFile(file: string): unknown {
  if (!existsSync(file)) return {};
  const text = readFileSync(file, "utf8");
  try {
    return settleBigInts(parseYaml(text, { intAsBigInt: true })) ?? {};
  } catch (err) {
    throw new HermesError("invalid_config", `${file}: not valid YAML: ${err instanceof Error ? err.message : String(err)}`, {
      data: { file },
      cause: err,
    });
  }
}

/** Reads KEY=VALUE lines of a .env file (no shell expansion, quotes stripped). */
export function readEnvFile(file: string): Record<string, string> {
  if (!existsSync(file)) return {};
  const out: Record<string, string> = {};
  for (const line of readFileSync(file, "utf8").split(/\r?\n/)) {
    const match = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (!match || line.trimStart().startsWith("#")) continue;
    let value = match[2]!;
    if (/^(['"]).*\1$/.test(value)) value = value.slice(1, -1);
    out[match[1]!] = value;
  }
  return out;
}
