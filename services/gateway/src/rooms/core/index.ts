/**
 * Public surface of the replicated-rooms core: pure functions, no I/O, clock and ids as inputs.
 * See README.md in this folder for the contract the store and adapters build on.
 */
export * from "./append.js";
export * from "./authority.js";
export * from "./canonical-json.js";
export * from "./commit-linger.js";
export * from "./hash-chain.js";
export * from "./id-index.js";
export * from "./invariants.js";
export * from "./limits.js";
export * from "./lineage.js";
export * from "./log-page.js";
export * from "./log-segment.js";
export * from "./pull-planner.js";
export * from "./refusal.js";
export * from "./replication.js";
export * from "./replication-policy.js";
export * from "./room-state.js";
export * from "./types.js";
export * from "./validation.js";
