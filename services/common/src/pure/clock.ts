/** Time as an input, so core logic and tests never read the wall clock themselves. */
export interface Clock {
  now(): number;
}

let lastMs = Number.NaN;
let lastIso = "";

/** `ms` as an ISO 8601 text. The last answer is reused: the writes of one step mostly stamp the same millisecond. */
export function isoTime(ms: number): string {
  if (ms !== lastMs) {
    lastIso = new Date(ms).toISOString();
    lastMs = ms;
  }
  return lastIso;
}
