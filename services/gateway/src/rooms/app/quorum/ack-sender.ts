import { type Logger, PeerChannel, toHermesError } from "@hermes/common";
import { QuorumServiceClient } from "@hermes/proto/hermes/v1/quorum";

/**
 * A replica's reports to the authorities of the quorum rooms it follows: the highest seq it holds
 * durably, per room (`QuorumService.Ack`). At most one call per room is in flight; a report made
 * meanwhile is sent when it returns (only the newest seq matters). `resendAll` repeats the last
 * report of every room, so an authority that just took over, or missed a report, hears it again.
 */
export class AckSender {
  private readonly rooms = new Map<string, { url: string; epoch: number; seq: number; sending: boolean; again: boolean }>();
  private readonly channels = new Map<string, PeerChannel>();

  constructor(
    private readonly gatewayId: string,
    private readonly meshKey: string | undefined,
    private readonly logger: Logger,
  ) {}

  report(roomId: string, url: string, epoch: number, seq: number): void {
    const room = this.rooms.get(roomId);
    if (room && room.url === url && room.epoch === epoch) room.seq = Math.max(room.seq, seq);
    else this.rooms.set(roomId, { url, epoch, seq, sending: false, again: false });
    this.send(roomId);
  }

  /** Stops reporting the room (it is led here now, or no longer followed). */
  forget(roomId: string): void {
    this.rooms.delete(roomId);
  }

  resendAll(): void {
    for (const roomId of this.rooms.keys()) this.send(roomId);
  }

  close(): void {
    for (const channel of this.channels.values()) channel.close();
    this.channels.clear();
    this.rooms.clear();
  }

  private send(roomId: string): void {
    const room = this.rooms.get(roomId);
    if (!room) return;
    if (room.sending) {
      room.again = true;
      return;
    }
    room.sending = true;
    room.again = false;
    const { url, epoch, seq } = room;
    const channel = this.channel(url);
    const client = channel.client(QuorumServiceClient);
    channel
      .unary(client, client.ack, { room_id: roomId, gateway_id: this.gatewayId, epoch, durable_seq: seq }, { timeoutMs: 5000 })
      .catch((err: unknown) => {
        const e = toHermesError(err);
        this.logger.debug({ room_id: roomId, url, reason: e.reason, err: e.message }, "the authority did not take the replica's ack");
      })
      .finally(() => {
        room.sending = false;
        if (room.again && this.rooms.get(roomId) === room) this.send(roomId);
      });
  }

  private channel(url: string): PeerChannel {
    let channel = this.channels.get(url);
    if (!channel) {
      channel = PeerChannel.open({ url, key: this.meshKey }, { deadlineMs: 5000, reconnectBackoffMs: { initial: 200, max: 2000 } });
      this.channels.set(url, channel);
    }
    return channel;
  }
}
