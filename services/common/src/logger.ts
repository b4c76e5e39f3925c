import { type Logger, pino } from "pino";

export type { Logger };

/**
 * JSON logs, one line per event, on stdout. HERMES_LOG_LEVEL overrides the level;
 * in-process tests default to "silent" through it.
 */
export function createLogger(name: string, level?: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    { name, level: process.env.HERMES_LOG_LEVEL ?? level ?? "info", base: { service: name }, timestamp: pino.stdTimeFunctions.isoTime },
    destination ?? pino.destination({ fd: 1, sync: false }),
  );
}
