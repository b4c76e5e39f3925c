import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PeerChannel } from "@hermes/common";
import { LogPage as WireLogPage } from "@hermes/proto/hermes/v1/rooms";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { startTestRelay, type TestRelay } from "../../../relay/test/support/relay-harness.js";
import { MAX_UNSENT_TUNNEL_BYTES, relayChannel } from "../../src/relay-link/app/relay-client.js";
import type { TunnelPage } from "../../src/relay-link/app/relay-room-source.js";
import { TunnelClient } from "../../src/relay-link/app/tunnel-client.js";
import { fromWirePage } from "../../src/rooms/app/wire.js";
import type { LogPage } from "../../src/rooms/core/index.js";
import { startTestGateway, type TestGateway } from "../support/gateway-harness.js";
import { CuttableProxy, MEMBERS } from "../support/rooms-fixtures.js";

/**
 * A live tail through the relay tunnel waits for the relay stream to drain, as one over /rpc
 * waits for its socket: while the relay does not read what the authority ("home") sends, the
 * tail reads no further pages, and the messages committed meanwhile arrive together afterwards
 * instead of piling up in the gateway's memory, page by page.
 */

const ROOM = "tail";
const BIG_TEXT = "x".repeat(60_000);
/** Messages committed while the relay stream is full. */
const WHILE_FULL = 20;

let relay: TestRelay;
let proxy: CuttableProxy;
let home: TestGateway;
let callerChannel: PeerChannel;
let callerTunnel: TunnelClient;

beforeAll(async () => {
  relay = await startTestRelay();
  const keys = { home: relay.relay.keys.add("home").key, caller: relay.relay.keys.add("caller").key };
  const [host, port] = relay.relay.grpcAddress.split(":");
  proxy = new CuttableProxy({ host: host!, port: Number(port) });
  await proxy.start();
  // home reaches the relay through the proxy; the caller dials the relay directly.
  home = await startTestGateway({
    home: mkdtempSync(join(tmpdir(), "hrb-home-")),
    overrides: { id: "home", relayUrl: proxy.url, relayKey: keys.home },
  });
  await eventually(() => expect(home.gateway.relay!.status().state).toBe("connected"));
  callerChannel = relayChannel({ url: `grpc://${relay.relay.grpcAddress}`, key: keys.caller });
  callerTunnel = new TunnelClient(callerChannel);
});

afterAll(async () => {
  callerChannel?.close();
  await home?.destroy();
  await proxy?.close();
  await relay?.destroy();
});

function decode(item: unknown): LogPage {
  return fromWirePage(WireLogPage.decode(Buffer.from((item as TunnelPage).page_b64, "base64")));
}

describe("a live tail through the relay tunnel", () => {
  it("stops reading pages while the relay stream is full, then sends what committed meanwhile together", async () => {
    const rooms = home.gateway.rooms;
    const link = home.gateway.relay!.client;
    rooms.create({ room_id: ROOM, name: "Tail", members: MEMBERS });
    const pages: LogPage[] = [];
    const controller = new AbortController();
    const reading = (async () => {
      for await (const item of callerTunnel.stream("home", "groups.subscribe", { room_id: ROOM, since_seq: 0 }, controller.signal)) {
        pages.push(decode(item));
      }
    })();
    try {
      await eventually(() => expect(pages.length).toBeGreaterThan(0)); // the handshake page

      proxy.stallClients();
      let big = 0;
      while (link.unsentTunnelBytes < MAX_UNSENT_TUNNEL_BYTES) {
        expect(big, "the relay stream never filled up").toBeLessThan(200);
        await rooms.send({ room_id: ROOM, event_id: `big-${big++}`, payload: { text: BIG_TEXT } });
      }
      const firstWhileFull = rooms.replicaState(ROOM).last_seq + 1;
      for (let i = 0; i < WHILE_FULL; i++) await rooms.send({ room_id: ROOM, event_id: `while-full-${i}`, payload: { text: BIG_TEXT } });
      const last = rooms.replicaState(ROOM).last_seq;
      // The tail read nothing more: what waits to be sent is the bound and at most the page that
      // crossed it (one event, well under 2 × its text in base64), not one more page per commit.
      expect(link.unsentTunnelBytes).toBeLessThan(MAX_UNSENT_TUNNEL_BYTES + 2 * BIG_TEXT.length);

      proxy.resumeClients();
      await eventually(() => expect(pages.at(-1)?.cursor).toBe(last), { timeoutMs: 15_000 });
      const seqs = pages.flatMap((p) => p.events.map((e) => e.seq));
      expect(seqs).toEqual(Array.from({ length: last }, (_, i) => i + 1));
      const pagesWhileFull = pages.filter((p) => p.events.some((e) => e.seq >= firstWhileFull));
      // One page per commit without backpressure; with it, the commits made while full come in one or two.
      expect(pagesWhileFull.length).toBeLessThanOrEqual(2);
      await eventually(() => expect(link.unsentTunnelBytes).toBe(0));
    } finally {
      controller.abort();
      await reading;
    }
  });
});
