export * from "./core/ack-tracker.js";
export * from "./core/authority.js";
export * from "./core/authority-record.js";
export * from "./core/decision.js";
export * from "./core/isr.js";
export * from "./core/keys.js";
export * from "./core/lease.js";
export * from "./core/quorum.js";
export * from "./core/registration.js";
export * from "./core/room-course.js";
export * from "./core/singleton.js";
export { checkEndpoints } from "./etcd/client.js";
export {
  type AuthorityRead,
  type CasResult,
  type ClaimOutcome,
  Coordinator,
  type CoordinatorOptions,
  type KeyRead,
  type RegisteredGateway,
} from "./etcd/coordinator.js";
export type { LeaseChange } from "./etcd/lease-keeper.js";
export type { SingletonHandle, SingletonHandlers } from "./etcd/singleton.js";
export type { WatchHandle } from "./etcd/watch.js";
