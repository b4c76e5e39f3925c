// `node --import` this file to have every module the process loads through the ESM loader appended,
// one URL per line, to the file named by HERMES_TEST_LOADS (a CommonJS module required by another
// CommonJS module is not seen: a package's entry is).
import { register } from "node:module";

register("./record-loads-hooks.mjs", import.meta.url);
