import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { authMetadata, unaryCall } from "@hermes/common";
import type { LogPage, RoomServiceClient, RoomStateReply, SendReply } from "@hermes/proto/hermes/v1/rooms";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DaemonProcess, startGatewayProcess } from "../../../../test/support/daemons.js";
import { eventually } from "../../../../test/support/eventually.js";
import { roomClient } from "../../src/rooms/api/room-client.js";
import { unpackEvents } from "../../src/rooms/app/wire.js";
import type { RoomEvent } from "../../src/rooms/core/index.js";
import { createBot, writeHomeConfig, writeHomeEnv } from "../support/delivery-fixtures.js";
import {
  type ScriptedProvider,
  scriptedBot,
  scriptedProviderConfig,
  startedTurns,
  startScriptedProvider,
  turnLines,
} from "../support/discussion-fixtures.js";
import { startTestGateway, TEST_KEY } from "../support/gateway-harness.js";

/**
 * Discussion durability: a gateway PROCESS (the built `hermes gateway start`) is killed with SIGKILL while
 * a member's turn is running. After a restart on the same home the driver resumes from the log:
 * the interrupted turn is logged `turn.failed{reason_code: runtime_offline}` and never run again,
 * and the discussion goes on with the next member.
 */

const homes: string[] = [];
const daemons: DaemonProcess[] = [];
let provider: ScriptedProvider;

beforeAll(async () => {
  provider = await startScriptedProvider();
});

afterAll(async () => {
  for (const d of daemons) await d.kill9();
  for (const h of homes) rmSync(h, { recursive: true, force: true });
  await provider?.close();
});

async function start(home: string): Promise<{ daemon: DaemonProcess; client: RoomServiceClient }> {
  const daemon = await startGatewayProcess(home, { env: { API_SERVER_KEY: TEST_KEY } });
  daemons.push(daemon);
  return { daemon, client: roomClient(`grpc://${daemon.grpc}`) };
}

async function readLog(client: RoomServiceClient, roomId: string): Promise<RoomEvent[]> {
  const page = await unaryCall<LogPage>((cb) =>
    client.log({ room_id: roomId, since_seq: 0, limit: 5000, packed: true, known_authority: undefined }, authMetadata(TEST_KEY), cb),
  );
  return unpackEvents(roomId, page.packed_events);
}

function state(client: RoomServiceClient, roomId: string): Promise<RoomStateReply> {
  return unaryCall<RoomStateReply>((cb) => client.state({ room_id: roomId, include_disbanded: false }, authMetadata(TEST_KEY), cb));
}

describe("restart mid-discussion", () => {
  it("kill -9 during a member turn: the turn is failed runtime_offline, never re-run, and the discussion resumes", async () => {
    const p = provider;
    const home = mkdtempSync(join(tmpdir(), "hdisc-crash-"));
    homes.push(home);
    const { config, env } = scriptedProviderConfig(p.url);
    writeHomeConfig(home, config);
    writeHomeEnv(home, env);
    // Profiles and the room, made by an in-process gateway on the same home, then handed to the process.
    const setup = await startTestGateway({ home });
    for (const name of ["alice", "bob", "carol"]) createBot(setup, name, scriptedBot());
    setup.gateway.rooms.create({
      room_id: "crash-room",
      name: "Crash",
      members: ["alice", "bob", "carol"].map((n) => ({ member_id: n, profile: n })),
    });
    await setup.stop();

    // Round 0: alice answers, bob's turn hangs (the process is killed in it), carol answers; later rounds pass.
    p.script((handle, n) => (n === 0 ? `${handle}: my first take` : "(pass)"));
    p.hold("bob");
    const first = await start(home);
    const sent = await unaryCall<SendReply>((cb) =>
      first.client.send({ room_id: "crash-room", event_id: "q1", payload: { text: "what's the plan?" } }, authMetadata(TEST_KEY), cb),
    );
    const userSeq = sent.event!.seq;
    await eventually(() => expect(p.held("bob")).toBe(1), { timeoutMs: 20_000 });
    const midway = await readLog(first.client, "crash-room");
    expect(startedTurns(midway)).toEqual(["0:alice", "0:bob"]);
    const bobTurn = turnLines(midway).find((l) => l.kind === "turn.started" && l.member === "bob")!.turn_id!;
    expect((await state(first.client, "crash-room")).driver_status).toBe("running");

    await first.daemon.kill9();
    first.client.close();
    await eventually(() => expect(p.held("bob")).toBe(0));
    const bobCallsBefore = p.callsOf("bob").length;
    p.release("bob"); // future bob turns are answered by the script

    const second = await start(home);
    const ended = await eventually(
      async () => {
        const s = await state(second.client, "crash-room");
        expect(s.discussion?.discussion_seq).toBe(userSeq);
        expect(["settled", "bounded"]).toContain(s.driver_status);
        return s;
      },
      { timeoutMs: 30_000 },
    );
    expect(ended.discussion).toMatchObject({ state: "settled", reason: "silent_round" });

    const events = await readLog(second.client, "crash-room");
    const lines = turnLines(events);
    // bob's interrupted turn: started once, then failed runtime_offline (by the restarted driver), never started again.
    const bobLines = lines.filter((l) => l.turn_id === bobTurn);
    expect(bobLines.map((l) => [l.kind, l.reason])).toEqual([
      ["turn.started", undefined],
      ["turn.failed", "runtime_offline"],
    ]);
    const failed = events.find((e) => e.kind === "turn.failed" && JSON.parse(e.payload_json).turn_id === bobTurn)!;
    expect(JSON.parse(failed.payload_json)).toMatchObject({
      member_id: "bob",
      round_index: 0,
      error: expect.stringContaining("not re-run"),
    });
    // The discussion resumed with carol in round 0; bob only ran again in a later round, on news.
    expect(startedTurns(events).slice(0, 3)).toEqual(["0:alice", "0:bob", "0:carol"]);
    expect(lines.filter((l) => l.kind === "message.member").map((l) => l.member)).toEqual(["alice", "carol"]);
    const bobCallsAfter = p.callsOf("bob").slice(bobCallsBefore);
    for (const call of bobCallsAfter) expect(call.messages.some((m) => m.content.includes("carol: my first take"))).toBe(true);
    // Every turn that started has exactly one end.
    for (const l of lines.filter((x) => x.kind === "turn.started")) {
      expect(lines.filter((x) => x.turn_id === l.turn_id && (x.kind === "turn.settled" || x.kind === "turn.failed"))).toHaveLength(1);
    }
    second.client.close();
    await second.daemon.stop();
  }, 120_000);

  it("a graceful stop gives the running turn the grace period, then logs it runtime_offline itself; the next start goes on", async () => {
    const p = provider;
    const home = mkdtempSync(join(tmpdir(), "hdisc-stop-"));
    homes.push(home);
    const { config, env } = scriptedProviderConfig(p.url);
    writeHomeConfig(home, { ...config, gateway: { shutdown_grace_seconds: 0.3 } });
    writeHomeEnv(home, env);
    const t = await startTestGateway({ home });
    for (const name of ["dora", "eli"]) createBot(t, name, scriptedBot());
    t.gateway.rooms.create({
      room_id: "stop-room",
      name: "Stop",
      members: ["dora", "eli"].map((n) => ({ member_id: n, profile: n })),
    });
    p.script((handle, n) => (n === 0 ? `${handle} speaking` : "(pass)"));
    p.hold("eli");
    const { event } = await t.gateway.rooms.send({ room_id: "stop-room", event_id: "q", payload: { text: "go" } });
    await eventually(() => expect(p.held("eli")).toBe(1));
    const stopping = Date.now();
    await t.stop();
    expect(Date.now() - stopping).toBeLessThan(10_000);
    p.release("eli");

    const again = await startTestGateway({ home });
    try {
      const events = again.gateway.rooms.log({ room_id: "stop-room", since_seq: 0, limit: 500 }).events;
      const failed = turnLines(events).find((l) => l.kind === "turn.failed")!;
      expect(failed).toMatchObject({ member: "eli", round: 0, reason: "runtime_offline" });
      const payload = JSON.parse(events.find((e) => e.seq === failed.seq)!.payload_json) as { error: string };
      expect(payload.error).toContain("the gateway stopped during this turn");
      // Written by the stopping gateway, so nothing is left open for the restart to fail.
      expect(turnLines(events).filter((l) => l.reason === "runtime_offline")).toHaveLength(1);
      const s = await eventually(() => {
        const st = again.gateway.rooms.state("stop-room");
        expect(st.discussion?.discussion_seq).toBe(event.seq);
        expect(["settled", "bounded"]).toContain(st.driver_status);
        return st;
      });
      expect(s.discussion?.state).toBe("settled");
    } finally {
      await again.stop();
    }
  }, 60_000);
});
