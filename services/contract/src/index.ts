/**
 * `@hermes/contract`: what crosses a process boundary and must agree on both sides (gateway, relay,
 * CLI, console): the delivery envelope and its limits, id and name rules, the typed failure reasons
 * and their exit codes, the receipt states. Pure: it imports only zod, so core modules and the
 * browser console use it alike (README.md).
 */
export * from "./envelope.js";
export * from "./errors.js";
export * from "./limits.js";
export * from "./names.js";
export * from "./receipts.js";
