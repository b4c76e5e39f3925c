// What the room benchmarks (bench:rooms, bench:quorum and their phase runner) share.
import { fileURLToPath } from "node:url";

/** The phase runner each benchmark starts in child processes. */
export const ROOMS_PHASES = fileURLToPath(new URL("../rooms-phases.mjs", import.meta.url));

/** The API key of the benchmark's gateways. */
export const BENCH_KEY = "bench-key-0123456789abcdef";

/** The members of every benchmark room. */
export const ROOM_MEMBERS = [
  { member_id: "alice", profile: "alice" },
  { member_id: "bob", profile: "bob" },
];
