/**
 * `@hermes/common/pure`: the part of @hermes/common a core module may import. Plain computation
 * only (typed errors and their wire codec, the clock interface, back-off arithmetic, config
 * validation with zod); it loads nothing that does I/O, reads the clock or draws randomness
 * (test/core-purity.test.ts asserts that at run time). What both ends of a wire must agree on (the
 * envelope, names and id rules, the reasons, the receipt states) is @hermes/contract.
 */
export * from "./backoff.js";
export * from "./checkpoint-pace.js";
export * from "./clock.js";
export * from "./config.js";
export * from "./daemon-flags.js";
export * from "./env.js";
export * from "./errors.js";
export * from "./lanes.js";
export * from "./lru-map.js";
export * from "./migration-step.js";
