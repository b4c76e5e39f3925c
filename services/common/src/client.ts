/**
 * The light half of @hermes/common: what a client such as the CLI needs (typed errors, names,
 * addresses, keys, gRPC call helpers, clocks, files), without the server half's weight (YAML and
 * zod config, pino, prom-client, SQLite, HTTP, reflection). Importing it keeps `hermes --help` fast.
 */
export * from "./auth.js";
export * from "./backoff.js";
export * from "./clock.js";
export * from "./errors.js";
export * from "./files.js";
export * from "./grpc.js";
export * from "./ids.js";
export * from "./names.js";
export * from "./net.js";
export * from "./peer-channel.js";
