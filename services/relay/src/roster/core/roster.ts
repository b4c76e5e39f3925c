import { HermesError } from "@hermes/common/pure";
import { NAME_RULE } from "@hermes/contract";
import { z } from "zod";

/** One bot as its gateway announces it. `handle` is the profile name there. */
export interface RosterBot {
  handle: string;
  display_name: string;
  title: string;
  description: string;
}

/** A bot as another gateway sees it. */
export interface RelayBot {
  connection: string;
  bot: RosterBot;
  online: boolean;
  /** The gateway id from that connection's last hello ("" if it never connected): rooms name members by it. */
  gateway_id: string;
}

/** One connection's roster as stored (its bots and the gateway id of its last hello). */
export interface StoredConnection {
  connection: string;
  gateway_id: string;
  bots: RosterBot[];
}

export interface RosterView {
  epoch: number;
  bots: RelayBot[];
}

/** Bots one gateway may announce; more is refused rather than silently cut. */
export const MAX_BOTS_PER_CONNECTION = 1000;

const botSchema = z
  .object({
    handle: z.string().regex(new RegExp(NAME_RULE), `a handle matching ${NAME_RULE}`),
    display_name: z.string().max(200),
    title: z.string().max(200),
    description: z.string().max(2000),
  })
  .strict();

const announceSchema = z.object({ bots: z.array(botSchema).max(MAX_BOTS_PER_CONNECTION) }).strict();

/** Validates an announce frame; the bots come back sorted by handle, duplicates refused. */
export function parseAnnounce(value: unknown): RosterBot[] {
  const parsed = announceSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length > 0 ? issue.path.map(String).join(".") : "roster";
    throw new HermesError("invalid_params", `invalid roster announce: ${where}: ${issue.message}`, { data: { field: where } });
  }
  const bots = [...parsed.data.bots].sort((a, b) => (a.handle < b.handle ? -1 : a.handle > b.handle ? 1 : 0));
  for (let i = 1; i < bots.length; i++) {
    if (bots[i]!.handle === bots[i - 1]!.handle) {
      throw new HermesError("invalid_params", `invalid roster announce: handle ${bots[i]!.handle} is listed twice`, {
        data: { field: "bots", handle: bots[i]!.handle },
      });
    }
  }
  return bots;
}

function sameBots(a: readonly RosterBot[], b: readonly RosterBot[]): boolean {
  return a.length === b.length && a.every((x, i) => JSON.stringify(x) === JSON.stringify(b[i]));
}

interface ConnectionRoster {
  bots: RosterBot[];
  online: boolean;
  gatewayId: string;
}

/**
 * The relay's roster: every connection's bots, the gateway id behind it and whether that gateway
 * is connected, with a capability epoch that rises on every change (a bot appears, disappears or is
 * renamed — a rename is one disappearing and one appearing — a gateway comes or goes, or another
 * gateway id connects under the name). Each gateway is shown the bots of the OTHER connections.
 * Offline connections keep their bots and gateway id (mail to them is queued until the TTL); a
 * revoked connection's bots are removed.
 */
export class RosterBook {
  private readonly connections = new Map<string, ConnectionRoster>();

  constructor(
    private epochValue: number,
    stored: Iterable<StoredConnection> = [],
  ) {
    for (const c of stored) this.connections.set(c.connection, { bots: c.bots, online: false, gatewayId: c.gateway_id });
  }

  get epoch(): number {
    return this.epochValue;
  }

  private bump(): true {
    this.epochValue += 1;
    return true;
  }

  /** The full list from a gateway; true (and a new epoch) when anything changed. */
  announce(connection: string, bots: RosterBot[]): boolean {
    const current = this.connections.get(connection);
    if (current && sameBots(current.bots, bots)) return false;
    this.connections.set(connection, { bots, online: current?.online ?? true, gatewayId: current?.gatewayId ?? "" });
    return this.bump();
  }

  /** A gateway's hello was accepted on `connection`; true (and a new epoch) when it was offline or had another id. */
  connected(connection: string, gatewayId: string): boolean {
    const current = this.connections.get(connection);
    if (!current) {
      this.connections.set(connection, { bots: [], online: true, gatewayId });
      return this.bump();
    }
    if (current.online && current.gatewayId === gatewayId) return false;
    current.online = true;
    current.gatewayId = gatewayId;
    return this.bump();
  }

  /** The connection's gateway went away (its bots and gateway id stay listed, offline). */
  disconnected(connection: string): boolean {
    const current = this.connections.get(connection);
    if (!current?.online) return false;
    current.online = false;
    return this.bump();
  }

  /** Forgets a connection (its key was revoked). */
  remove(connection: string): boolean {
    if (!this.connections.delete(connection)) return false;
    return this.bump();
  }

  bots(connection: string): readonly RosterBot[] {
    return this.connections.get(connection)?.bots ?? [];
  }

  isOnline(connection: string): boolean {
    return this.connections.get(connection)?.online ?? false;
  }

  gatewayId(connection: string): string {
    return this.connections.get(connection)?.gatewayId ?? "";
  }

  /** What `connection` is told: the bots everywhere else, sorted by connection then handle. */
  viewFor(connection: string): RosterView {
    const bots: RelayBot[] = [];
    const names = [...this.connections.keys()].filter((c) => c !== connection).sort();
    for (const name of names) {
      const entry = this.connections.get(name)!;
      for (const bot of entry.bots) bots.push({ connection: name, bot, online: entry.online, gateway_id: entry.gatewayId });
    }
    return { epoch: this.epochValue, bots };
  }
}
