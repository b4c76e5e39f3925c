import type { RelayBot } from "@hermes/proto/hermes/v1/relay";
import type { RemoteBot } from "../../core/delivery/targets.js";

/** A bot on another connection, as the relay described it. */
export interface RemoteRosterEntry {
  connection: string;
  handle: string;
  display_name: string;
  title: string;
  description: string;
  online: boolean;
}

/**
 * The bots on the OTHER connections of the relay, with the capability epoch of the last update.
 * The delivery service reads `bots()` (the Bot Chat roster in system prompts and `<handle>@<connection>`
 * target resolution); an update with an epoch not above the current one is ignored, so a late frame
 * can never roll the roster back.
 */
export class RemoteRoster {
  private list: RemoteRosterEntry[] = [];
  private epochValue = 0;

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
        handle: b.bot!.handle,
        display_name: b.bot!.display_name,
        title: b.bot!.title,
        description: b.bot!.description,
        online: b.online,
      }));
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
    return this.list.map((b) => ({ handle: b.handle, connection: b.connection, title: b.title }));
  }
}
