import { HermesError } from "@hermes/common";

export interface TunnelContext {
  /** The relay connection that made the call. */
  from_connection: string;
  /** Aborted when the caller goes away or the relay link drops. */
  signal: AbortSignal;
  /** Resolves once the relay stream has room for more answers again (or the call ended). */
  drained(): Promise<void>;
}

/**
 * Hands one item of a streaming call to the relay stream. False when the stream is full (its
 * unsent answers are over the bound): the handler waits for `drained` before producing the next.
 */
export type TunnelEmit = (item: unknown) => boolean;

/** A method served through the relay tunnel: unary (one result) or streaming (items until it returns). */
export type TunnelHandler =
  | { kind: "unary"; run(params: Record<string, unknown>, ctx: TunnelContext): Promise<unknown> }
  | { kind: "stream"; run(params: Record<string, unknown>, ctx: TunnelContext, emit: TunnelEmit): Promise<void> };

/**
 * The methods this gateway serves to other gateways through the relay tunnel: room reads
 * (`groups.log`, `groups.subscribe`) and turn requests, registered by the modules that own them.
 * Anything not registered is refused with `method_not_found`; the relay itself forwards blindly.
 */
export class TunnelHandlers {
  private readonly handlers = new Map<string, TunnelHandler>();

  register(method: string, handler: TunnelHandler): void {
    if (this.handlers.has(method)) throw new HermesError("already_exists", `tunnel method ${method} is already registered`);
    this.handlers.set(method, handler);
  }

  unregister(method: string): void {
    this.handlers.delete(method);
  }

  get(method: string): TunnelHandler {
    const handler = this.handlers.get(method);
    if (!handler) {
      const known = [...this.handlers.keys()].sort();
      throw new HermesError(
        "method_not_found",
        `this gateway serves no ${JSON.stringify(method)} through the relay tunnel${known.length > 0 ? ` (it serves: ${known.join(", ")})` : ""}`,
        { data: { method, methods: known } },
      );
    }
    return handler;
  }

  methods(): string[] {
    return [...this.handlers.keys()].sort();
  }
}
