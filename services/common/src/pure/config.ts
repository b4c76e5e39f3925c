import type { z } from "zod";
import { HermesError } from "./errors.js";

function issuePath(path: readonly PropertyKey[]): string {
  return path.length === 0 ? "(top level)" : path.map(String).join(".");
}

/** One message naming the offending key for the first problem zod found. */
export function describeConfigError(file: string, error: z.ZodError): string {
  const issue = error.issues[0]!;
  if (issue.code === "unrecognized_keys") {
    const where = issue.path.length ? ` under ${issuePath(issue.path)}` : "";
    return `${file}: unknown key ${issue.keys.map((k) => JSON.stringify(k)).join(", ")}${where}`;
  }
  return `${file}: ${issuePath(issue.path)}: ${issue.message}`;
}

/** Validates a plain object against a schema, throwing invalid_config (exit 2) that names the key. */
export function validateConfig<S extends z.ZodType>(schema: S, value: unknown, file: string): z.infer<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new HermesError("invalid_config", describeConfigError(file, parsed.error), { data: { file } });
  return parsed.data;
}
