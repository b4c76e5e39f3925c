import { randomBytes } from "node:crypto";

/** A random id with a readable prefix, e.g. `dlv_3f9c…` (24 hex chars, 96 bits). */
export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString("hex")}`;
}
