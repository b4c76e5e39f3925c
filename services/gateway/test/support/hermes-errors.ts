import { HermesError } from "@hermes/common/pure";

/** Runs `fn` and returns the HermesError it throws; anything else (or nothing thrown) fails the test. */
export function thrownHermesError(fn: () => unknown): HermesError {
  try {
    fn();
  } catch (err) {
    if (err instanceof HermesError) return err;
    throw err;
  }
  throw new Error("expected a HermesError to be thrown");
}
