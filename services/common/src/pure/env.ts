import { HermesError } from "./errors.js";

/**
 * An environment variable's value, or undefined when it is unset or blank. `NAME=` in an env file,
 * or `NAME="$UNSET"` in a script, means "not set", as `${NAME:-default}` reads it in a shell: a
 * blank HERMES_HOME must mean ~/.hermes, not the current folder.
 */
export function envValue(env: Readonly<Record<string, string | undefined>>, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === "" ? undefined : value;
}

/** A whole number of milliseconds, 0 to `max`, written in the variable `name`; anything else is `invalid_config`. */
export function parseMilliseconds(value: string, name: string, max: number): number {
  const ms = Number(value.trim());
  if (!/^\s*\d+\s*$/.test(value) || ms > max) {
    throw new HermesError("invalid_config", `${name}=${JSON.stringify(value)} is not a whole number of milliseconds from 0 to ${max}`);
  }
  return ms;
}
