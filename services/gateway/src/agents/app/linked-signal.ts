/**
 * `AbortSignal.any` for work that ends: a signal that aborts when any source does (with that
 * source's reason), or when its owner aborts it. `dispose` removes its listeners when the work is
 * over; a composite of `AbortSignal.any` instead stays registered on its long-lived sources until
 * a garbage collection, which costs every turn tens of microseconds.
 */
export class LinkedSignal {
  private readonly controller = new AbortController();
  private readonly sources: AbortSignal[] = [];
  private readonly onAbort = (event: Event) => this.abort((event.target as AbortSignal).reason);

  constructor(sources: readonly (AbortSignal | undefined)[]) {
    for (const source of sources) {
      if (source === undefined) continue;
      if (source.aborted) {
        this.abort(source.reason);
        return;
      }
      source.addEventListener("abort", this.onAbort, { once: true });
      this.sources.push(source);
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Stops listening to the sources (the signal keeps its state). */
  dispose(): void {
    for (const source of this.sources) source.removeEventListener("abort", this.onAbort);
    this.sources.length = 0;
  }

  /** Aborts it now, with `reason` (not through a source); a second abort changes nothing. */
  abort(reason: unknown): void {
    this.dispose();
    this.controller.abort(reason);
  }
}
