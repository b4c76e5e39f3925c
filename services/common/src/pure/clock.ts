/** Time as an input, so core logic and tests never read the wall clock themselves. */
export interface Clock {
  now(): number;
}

export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}
