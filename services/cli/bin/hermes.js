#!/usr/bin/env node
import { main } from "../dist/main.js";

main(process.argv).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`hermes: internal error: ${err?.stack ?? err}\n`);
    process.exitCode = 1;
  },
);
