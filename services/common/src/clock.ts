import type { Clock } from "./pure/clock.js";

/** The wall clock, which the shells hand to the core (the core itself only sees a `Clock`). */
export const systemClock: Clock = { now: () => Date.now() };
