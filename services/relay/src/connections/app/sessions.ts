import type { HermesError } from "@hermes/common";
import type { RelayFrame } from "@hermes/proto/hermes/v1/relay";

/** One gateway's open Connect stream, after its hello was accepted. */
export interface GatewaySession {
  /** Unique per stream (a reconnect of the same connection gets a new one). */
  readonly id: number;
  readonly connection: string;
  readonly gatewayId: string;
  /** Writes a frame; false when the stream is already closed. */
  send(frame: RelayFrame): boolean;
  /** Ends the stream, with a typed error for the gateway when given. */
  close(error?: HermesError): void;
}

/**
 * The live stream of every connected gateway: at most one per connection. A new stream of a
 * connection replaces the old one (a gateway that reconnects after a NAT rebinding usually does so
 * before the relay notices the old path is dead); the key proves it is the same gateway.
 */
export class SessionTable {
  private readonly byConnection = new Map<string, GatewaySession>();

  get(connection: string): GatewaySession | undefined {
    return this.byConnection.get(connection);
  }

  isOnline(connection: string): boolean {
    return this.byConnection.has(connection);
  }

  get size(): number {
    return this.byConnection.size;
  }

  all(): GatewaySession[] {
    return [...this.byConnection.values()];
  }

  /** Makes `session` the connection's stream; returns the one it replaces, if any. */
  attach(session: GatewaySession): GatewaySession | undefined {
    const previous = this.byConnection.get(session.connection);
    this.byConnection.set(session.connection, session);
    return previous;
  }

  /** Removes `session` if it is still the connection's stream (true), else leaves the newer one. */
  detach(session: GatewaySession): boolean {
    if (this.byConnection.get(session.connection) !== session) return false;
    this.byConnection.delete(session.connection);
    return true;
  }
}
