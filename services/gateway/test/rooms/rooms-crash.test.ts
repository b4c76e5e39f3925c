import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { authMetadata, unaryCall } from "@hermes/common";
import type { LogPage, RoomServiceClient } from "@hermes/proto/hermes/v1/rooms";
import { afterAll, describe, expect, it } from "vitest";
import { type DaemonProcess, startGatewayProcess } from "../../../../test/support/daemons.js";
import { eventually } from "../../../../test/support/eventually.js";
import { AppendStream, roomClient } from "../../src/rooms/api/room-client.js";
import { unpackEvents } from "../../src/rooms/app/wire.js";
import { type RoomEvent, verifyChain } from "../../src/rooms/core/index.js";
import { TEST_KEY } from "../support/gateway-harness.js";
import { MEMBERS } from "../support/rooms-fixtures.js";

/**
 * kill -9 a gateway PROCESS while clients send (acknowledged = durable): after a restart on
 * the same home every acknowledged event is present at the seq it was acknowledged with, nothing
 * appears twice, the hash chain verifies, and a send of an acknowledged id again is idempotent. Runs the built `hermes gateway start`.
 */

const homes: string[] = [];
const daemons: DaemonProcess[] = [];

afterAll(async () => {
  for (const d of daemons) await d.kill9();
  for (const h of homes) rmSync(h, { recursive: true, force: true });
});

async function startChild(home: string): Promise<DaemonProcess> {
  const daemon = await startGatewayProcess(home, { env: { API_SERVER_KEY: TEST_KEY, HERMES_GATEWAY_ID: "gw-crash" } });
  daemons.push(daemon);
  return daemon;
}

async function readAll(client: RoomServiceClient, roomId: string): Promise<RoomEvent[]> {
  const events: RoomEvent[] = [];
  for (let since = 0; ; ) {
    const page = await unaryCall<LogPage>((cb) =>
      client.log({ room_id: roomId, since_seq: since, limit: 5000, packed: true, known_authority: undefined }, authMetadata(TEST_KEY), cb),
    );
    events.push(...unpackEvents(roomId, page.packed_events));
    since = page.cursor;
    if (!page.has_more) return events;
  }
}

describe("kill -9 during concurrent sends", () => {
  it("keeps every acknowledged event, once, with a verifying hash chain", async () => {
    const home = mkdtempSync(join(tmpdir(), "hermes-crash-"));
    homes.push(home);
    const acked = new Map<string, { seq: number; hash: string }>();
    const attempted = new Set<string>();

    for (let round = 0; round < 3; round++) {
      const gateway = await startChild(home);
      const client = roomClient(`grpc://${gateway.grpc}`);
      if (round === 0) {
        await unaryCall((cb) => client.create({ room_id: "crash", name: "Crash", members: MEMBERS }, authMetadata(TEST_KEY), cb));
      }
      // Four pipelined writers and a unary one, until the kill.
      let killed = false;
      const writers = Array.from({ length: 4 }, (_, w) =>
        (async () => {
          const stream = new AppendStream(client, TEST_KEY);
          let broken = false;
          for (let i = 0; !killed && !broken; i++) {
            const batch = Array.from({ length: 200 }, (_, j) => `r${round}-w${w}-${i}-${j}`);
            await Promise.all(
              batch.map((id) => {
                attempted.add(id);
                return stream.send({ room_id: "crash", event_id: id, payload: { text: `payload of ${id}` } }).then(
                  (ok) => acked.set(id, { seq: ok.seq, hash: ok.hash }),
                  () => {
                    broken = true;
                  },
                );
              }),
            );
          }
          stream.cancel();
        })(),
      );
      const unary = (async () => {
        for (let i = 0; !killed; i++) {
          const id = `r${round}-unary-${i}`;
          attempted.add(id);
          try {
            const ok = await unaryCall<{ event?: { seq: number; hash: string } }>((cb) =>
              client.send({ room_id: "crash", event_id: id, payload: { text: id } }, authMetadata(TEST_KEY), cb),
            );
            acked.set(id, { seq: ok.event!.seq, hash: ok.event!.hash });
          } catch {
            // Unknown outcome once the process is gone.
            break;
          }
        }
      })();
      // The kill lands with plenty in flight: after 2000 more acknowledgements, or after 30 s of
      // whatever a slow machine managed (at least one).
      const before = acked.size;
      const enough = performance.now() + 30_000;
      await eventually(() => acked.size >= before + 2000 || (performance.now() > enough && acked.size > before), {
        timeoutMs: 60_000,
        what: "acknowledged sends before the kill",
      });
      killed = true;
      await gateway.kill9();
      await Promise.all([...writers, unary]);
      client.close();
    }

    const gateway = await startChild(home);
    const client = roomClient(`grpc://${gateway.grpc}`);
    const events = await readAll(client, "crash");
    expect(verifyChain(events, 0, "").ok).toBe(true);
    const byId = new Map<string, RoomEvent>();
    for (const e of events) {
      expect(byId.has(e.event_id), `${e.event_id} appears twice`).toBe(false);
      byId.set(e.event_id, e);
      if (e.kind === "message.user") expect(attempted.has(e.event_id)).toBe(true);
    }
    let missing = 0;
    for (const [id, ack] of acked) {
      const stored = byId.get(id);
      if (!stored || stored.seq !== ack.seq || stored.hash !== ack.hash) missing++;
    }
    console.log(
      `kill -9 ×3: ${attempted.size} sends attempted, ${acked.size} acknowledged, ${events.length} events after restart, ${missing} acknowledged missing`,
    );
    expect(missing).toBe(0);
    // The event id index came back too (its newest ids from the log, older ones from its runs): an
    // acknowledged send sent again is answered with its stored event, not appended.
    const sample = [...acked].filter((_, i) => i % 9 === 0);
    for (const [id, ack] of sample) {
      const text = id.includes("-unary-") ? id : `payload of ${id}`;
      const again = await unaryCall<{ event?: { seq: number }; idempotent: boolean }>((cb) =>
        client.send({ room_id: "crash", event_id: id, payload: { text } }, authMetadata(TEST_KEY), cb),
      );
      expect({ id, seq: again.event!.seq, idempotent: again.idempotent }).toEqual({ id, seq: ack.seq, idempotent: true });
    }
    // The gateway still takes sends after the crashes.
    const after = await unaryCall<{ event?: { seq: number } }>((cb) =>
      client.send({ room_id: "crash", event_id: "after-crash", payload: { text: "ok" } }, authMetadata(TEST_KEY), cb),
    );
    expect(after.event!.seq).toBe(events.length + 1);
    client.close();
    expect((await gateway.stop()).code).toBe(0);
  }, 180_000);
});
