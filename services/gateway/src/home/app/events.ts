/**
 * A small typed event emitter: what a service publishes to the services built after it (profile
 * lifecycle, room commits), so a subscriber registers itself when it is constructed and nobody is
 * wired in afterwards.
 *
 * Listeners run synchronously, in the REVERSE order of subscription, and a throw propagates to the
 * emitter's caller (the operation fails as if its own step had failed). A subscriber is built after
 * what it depends on, so it subscribes later and hears an event first, while everything it relies
 * on still stands: the same rule as the stop order, the reverse of the start order.
 */
export class Events<M extends { [E in keyof M]: unknown[] }> {
  /** Per event, newest subscriber first. */
  private readonly listeners = new Map<keyof M, unknown[]>();

  /** Subscribes; returns the unsubscribe function. */
  on<E extends keyof M>(event: E, listener: (...args: M[E]) => void): () => void {
    this.listeners.set(event, [listener, ...(this.listeners.get(event) ?? [])]);
    return () =>
      this.listeners.set(
        event,
        (this.listeners.get(event) ?? []).filter((l) => l !== listener),
      );
  }

  emit<E extends keyof M>(event: E, ...args: M[E]): void {
    for (const listener of (this.listeners.get(event) ?? []) as ((...a: M[E]) => void)[]) listener(...args);
  }
}
