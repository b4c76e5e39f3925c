// `node --import` this file to have every module the process resolves logged, one JSON line
// {specifier, parent, url} each, to the file named by HERMES_TEST_LOADS (a CommonJS module
// required by another CommonJS module is not seen: a package's entry is).
import { register } from "node:module";

register(new URL("../../../../test/support/record-resolutions.mjs", import.meta.url), {
  data: { logFile: process.env.HERMES_TEST_LOADS },
});
