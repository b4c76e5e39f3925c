// Module-resolution hooks (node:module `register`) that append every resolution as one JSON line
// {specifier, parent, url} to the file named in the registration data. The file is written
// synchronously, so it is complete once the process that imported the modules has exited.
import { appendFileSync } from "node:fs";

let logFile;

export function initialize(data) {
  logFile = data.logFile;
}

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  appendFileSync(logFile, `${JSON.stringify({ specifier, parent: context.parentURL ?? null, url: resolved.url })}\n`);
  return resolved;
}
