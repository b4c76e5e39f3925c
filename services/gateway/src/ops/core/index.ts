// The operator's pure decisions, shared by the CLI (`@hermes/gateway/ops`), the console and the gateway.
export * from "./health-check.js";
export * from "./mesh-status.js";
export * from "./room-wait.js";
export * from "./runbook.js";
