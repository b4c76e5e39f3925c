/**
 * The light half of @hermes/common: what a client such as the CLI needs (the pure part, plus
 * addresses, keys, gRPC call helpers, the wall clock, files), without the server half's weight
 * (YAML config, pino, prom-client, SQLite, HTTP, reflection). Importing it keeps `hermes --help` fast.
 */
export * from "./auth.js";
export * from "./backoff.js";
export * from "./clock.js";
export * from "./files.js";
export * from "./grpc.js";
export * from "./grpc-status.js";
export * from "./ids.js";
export * from "./net.js";
export * from "./peer-channel.js";
export * from "./pure/index.js";
