/**
 * `@hermes/contract`: what crosses a process boundary and must agree on both sides (gateway, relay,
 * CLI, console): the delivery limits and rules, id and name rules, the typed failure reasons and
 * their exit codes, the receipt states. Pure, and it loads nothing at run time, so the CLI's
 * start-up, core modules and the browser console use it alike. The envelope's zod schema is the
 * subpath `@hermes/contract/envelope` (README.md).
 */
export * from "./delivery.js";
export * from "./errors.js";
export * from "./limits.js";
export * from "./names.js";
export * from "./receipts.js";
