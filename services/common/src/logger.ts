import { type Logger, pino } from "pino";
import { envValue } from "./pure/env.js";
import { HermesError } from "./pure/errors.js";

export type { Logger };

const LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

/**
 * JSON logs, one line per event, on stdout. HERMES_LOG_LEVEL overrides the level (blank: not
 * set); in-process tests default to "silent" through it. An unknown level is `invalid_config`.
 */
export function createLogger(name: string, level?: string, destination?: NodeJS.WritableStream): Logger {
  const fromEnv = envValue(process.env, "HERMES_LOG_LEVEL");
  if (fromEnv !== undefined && !LEVELS.includes(fromEnv)) {
    throw new HermesError(
      "invalid_config",
      `HERMES_LOG_LEVEL=${JSON.stringify(fromEnv)} is not a log level: use one of ${LEVELS.join(", ")}`,
    );
  }
  return pino(
    { name, level: fromEnv ?? level ?? "info", base: { service: name }, timestamp: pino.stdTimeFunctions.isoTime },
    destination ?? pino.destination({ fd: 1, sync: false }),
  );
}
