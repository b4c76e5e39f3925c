import { authMetadata, deadlineIn, toHermesError, unaryCall } from "@hermes/common";
import type {
  DivergenceReply,
  LogPage,
  RoomReply,
  RoomServiceClient,
  RoomStateReply,
  SendReply,
  StopReply,
} from "@hermes/proto/hermes/v1/rooms";
import { type DaemonProcess, startGatewayProcess } from "../../../../test/support/daemons.js";
import { roomClient } from "../../src/rooms/api/room-client.js";
import { unpackEvents } from "../../src/rooms/app/wire.js";
import type { RoomEvent } from "../../src/rooms/core/index.js";
import { TEST_KEY } from "./gateway-harness.js";
import { MEMBERS, MESH_KEY } from "./quorum-fixtures.js";

/**
 * Gateways of one coordinated mesh as PROCESSES of the built CLI (for kill -9 and SIGSTOP), each
 * driven over its gRPC RoomService with a deadline on every call (a frozen or dead gateway answers
 * nothing).
 */

export interface MeshProcess {
  id: string;
  home: string;
  daemon: DaemonProcess;
  client: RoomServiceClient;
}

/** `hermes gateway start --id ID` on `home` (its config.yaml names the mesh's etcd: quorumHome). */
export async function startMeshProcess(id: string, home: string): Promise<MeshProcess> {
  const daemon = await startGatewayProcess(home, {
    args: ["--id", id],
    env: { API_SERVER_KEY: TEST_KEY, HERMES_MESH_KEY: MESH_KEY },
  });
  return { id, home, daemon, client: roomClient(`grpc://${daemon.grpc}`) };
}

export function createQuorumRoom(gw: MeshProcess, roomId: string, replicas: string[], minInsync: number): Promise<RoomReply> {
  return unaryCall<RoomReply>((cb) =>
    gw.client.create(
      { room_id: roomId, name: roomId, members: MEMBERS, replication: { mode: "quorum", replicas, min_insync: minInsync } },
      authMetadata(TEST_KEY),
      deadlineIn(10_000),
      cb,
    ),
  );
}

/** One send; resolves only when the gateway acknowledged it. */
export function sendTo(gw: MeshProcess, roomId: string, eventId: string, timeoutMs = 5000): Promise<SendReply> {
  return unaryCall<SendReply>((cb) =>
    gw.client.send(
      { room_id: roomId, event_id: eventId, payload: { text: `text of ${eventId}` } },
      authMetadata(TEST_KEY),
      deadlineIn(timeoutMs),
      cb,
    ),
  );
}

export function stateOf(gw: MeshProcess, roomId: string): Promise<RoomStateReply> {
  return unaryCall<RoomStateReply>((cb) =>
    gw.client.state({ room_id: roomId, include_disbanded: false }, authMetadata(TEST_KEY), deadlineIn(3000), cb),
  );
}

export function divergenceOf(gw: MeshProcess, roomId: string): Promise<DivergenceReply> {
  return unaryCall<DivergenceReply>((cb) => gw.client.divergence({ room_id: roomId }, authMetadata(TEST_KEY), deadlineIn(3000), cb));
}

/** Every event of the room stored on this gateway, in seq order. */
export async function logOf(gw: MeshProcess, roomId: string): Promise<RoomEvent[]> {
  const events: RoomEvent[] = [];
  for (let since = 0; ; ) {
    const page = await unaryCall<LogPage>((cb) =>
      gw.client.log(
        { room_id: roomId, since_seq: since, limit: 5000, packed: true, known_authority: undefined },
        authMetadata(TEST_KEY),
        deadlineIn(5000),
        cb,
      ),
    );
    events.push(...unpackEvents(roomId, page.packed_events));
    since = page.cursor;
    if (!page.has_more) return events;
  }
}

/** `groups stop` of the room on a replica: it stops following (and stays in the ISR until max_lag passes). */
export function stopFollowing(gw: MeshProcess, roomId: string): Promise<StopReply> {
  return unaryCall<StopReply>((cb) => gw.client.stop({ room_id: roomId }, authMetadata(TEST_KEY), deadlineIn(3000), cb));
}

/** `groups replicate` of a quorum room: the replica follows the authority its record names again. Resolves once it caught up (or was refused: the reason). */
export function resumeFollowing(gw: MeshProcess, roomId: string): Promise<string> {
  return new Promise((resolve) => {
    const call = gw.client.replicate(
      { room_id: roomId, from: { url: "grpc://unused:1", key: "", peer: "" }, follow: true },
      authMetadata(TEST_KEY),
      deadlineIn(10_000),
    );
    call.on("data", () => undefined);
    call.on("end", () => resolve("ok"));
    call.on("error", (err) => resolve(toHermesError(err).reason));
  });
}

/** SIGSTOP / SIGCONT: a frozen process (a GC pause, a VM freeze); its ports stay bound, nothing answers. */
export function pause(gw: MeshProcess): void {
  gw.daemon.child.kill("SIGSTOP");
}

export function resume(gw: MeshProcess): void {
  gw.daemon.child.kill("SIGCONT");
}
