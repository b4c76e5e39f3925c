import type { RelayBot } from "@hermes/proto/hermes/v1/relay";
import type { RemoteRosterSource } from "../../delivery/app/roster.js";
import type { RemoteBot } from "../../delivery/core/targets.js";
import { Events } from "../../home/app/events.js";

/** A bot on another connection, as the relay described it. */
export interface RemoteRosterEntry {
  connection: string;
  /** The gateway id behind that connection ("" from a relay that does not send it). */
  gateway_id: string;
  handle: string;
  display_name: string;
  title: string;
  description: string;
  online: boolean;
}

/**
 * The bots on the OTHER connections of the relay, with the capability epoch of the last update.
 * The delivery service reads `bots()` (the Bot Chat roster in system prompts and `<handle>@<connection>`
 * target resolution); room authorities read `connectionOf()` to reach a member's gateway. An update
 * with an epoch not above the current one is ignored, so a late frame can never roll the roster back.
 */
export class RemoteRoster implements RemoteRosterSource {
  private list: RemoteRosterEntry[] = [];
  private epochValue = 0;
  /** `changed` after an update that was newer than what we had. */
  readonly changes = new Events<{ changed: [] }>();

  get epoch(): number {
    return this.epochValue;
  }

  /** Applies an update; true when it was newer than what we had. */
  update(epoch: number, bots: readonly RelayBot[], self: string): boolean {
    if (epoch <= this.epochValue) return false;
    this.epochValue = epoch;
    this.list = bots
      .filter((b) => b.bot && b.connection !== self)
      .map((b) => ({
        connection: b.connection,
        gateway_id: b.gateway_id,
        handle: b.bot!.handle,
        display_name: b.bot!.display_name,
        title: b.bot!.title,
        description: b.bot!.description,
        online: b.online,
      }));
    this.changes.emit("changed");
    return true;
  }

  /** Forgets the epoch (a relay restarted from an older backup may count from lower again). */
  resetEpoch(): void {
    this.epochValue = 0;
  }

  entries(): readonly RemoteRosterEntry[] {
    return this.list;
  }

  /** RemoteRosterSource for the delivery service. */
  bots(): readonly RemoteBot[] {
    return this.list.map((b) => ({
      handle: b.handle,
      connection: b.connection,
      display_name: b.display_name,
      title: b.title,
      description: b.description,
      online: b.online,
    }));
  }

  /**
   * The relay connection of the gateway with this id, or undefined when no connection in the
   * roster names it (then the caller may try a connection named like the id). Connection names and
   * gateway ids are independent (`relay.connection: vps` on gateway `gw-469bc200`), which is why
   * rooms, which name members by gateway id, look it up here. Should several connections claim the
   * id (a gateway re-keyed under a new name leaves the old one listed offline), the choice is
   * deterministic: an online one, then one named like the id, then the first by name.
   */
  connectionOf(gatewayId: string): string | undefined {
    if (!gatewayId) return undefined;
    const candidates = new Map<string, boolean>();
    for (const b of this.list) {
      if (b.gateway_id === gatewayId) candidates.set(b.connection, (candidates.get(b.connection) ?? false) || b.online);
    }
    const rank = (connection: string) => (candidates.get(connection) ? 0 : 2) + (connection === gatewayId ? 0 : 1);
    return [...candidates.keys()].sort((x, y) => rank(x) - rank(y) || (x < y ? -1 : x > y ? 1 : 0))[0];
  }
}
