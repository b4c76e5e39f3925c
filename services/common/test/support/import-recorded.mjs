// `node import-recorded.mjs LOG_FILE MODULE…`: imports each module (an absolute path) in this fresh
// process while test/support/record-resolutions.mjs logs every module resolved on the way, to LOG_FILE.
import { register } from "node:module";
import { pathToFileURL } from "node:url";

const [logFile, ...modules] = process.argv.slice(2);
register(new URL("../../../../test/support/record-resolutions.mjs", import.meta.url), { data: { logFile } });
for (const path of modules) await import(pathToFileURL(path).href);
