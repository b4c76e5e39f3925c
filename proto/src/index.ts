import { readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

/** The folder holding the .proto sources (include root), for server reflection. */
export const PROTO_DIR = fileURLToPath(new URL("..", import.meta.url));

/** Every .proto file under PROTO_DIR, relative to it (e.g. `hermes/v1/gateway.proto`). */
export function protoFiles(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(dir).flatMap((name) => {
      const path = join(dir, name);
      if (["node_modules", "src", "dist", "scripts"].includes(name)) return [];
      if (statSync(path).isDirectory()) return walk(path);
      return name.endsWith(".proto") ? [relative(PROTO_DIR, path)] : [];
    });
  return walk(PROTO_DIR).sort();
}
