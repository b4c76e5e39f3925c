export * from "./client.js";
export * from "./config.js";
export * from "./daemon.js";
export * from "./grpc-standard.js";
export * from "./http.js";
export * from "./logger.js";
export * from "./metrics.js";
export * from "./sqlite.js";
