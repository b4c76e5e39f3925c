import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@grpc/grpc-js";
import { authMetadata } from "@hermes/common";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DaemonProcess, HERMES_BIN, startGatewayProcess } from "../../../../test/support/daemons.js";
import {
  callRaw,
  encodeAt,
  expectRunning as expectGatewayRunning,
  expectTypedAnswer,
  type FieldStep,
  type FuzzMethod,
  fieldLabel,
  fuzzMethods,
  inBatches,
  NASTY_VALUES,
  type NastyValue,
  randomValues,
  rawClient,
  reflectedServices,
} from "../../../../test/support/grpc-fuzz.js";

/**
 * Text a gateway cannot put in a gRPC trailer as it is (non-ASCII, NUL, invalid UTF-8, very
 * long) against a real gateway PROCESS, on its TCP port (with the key) and its control socket:
 * every string field of every method. After each call a health check must answer, so a crash
 * shows as a failed check and an exited process; every answer is OK or a typed error whose text
 * shows the input as it was sent.
 */

const KEY = "grpc-fuzz-key-0123456789abcdef";
const SERVED = ["GatewayService", "BotModeService", "DeliveryService", "OpsService", "PeerService", "RoomService", "RoomMemberService"].map(
  (s) => `hermes.v1.${s}`,
);
const STANDARD = ["grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"];

let home: string;
let gw: DaemonProcess;
let tcp: Client;
let control: Client;

/**
 * Requests the fuzzed field is written into, so it is checked after the fields before it pass
 * (a message to a real teammate, a turn of a real profile). Methods not listed start empty.
 */
const BASE_REQUESTS: Record<string, object> = {
  "/hermes.v1.GatewayService/CreateProfile": { name: "fuzzed" },
  "/hermes.v1.GatewayService/Chat": { profile: "alice", text: "hi" },
  "/hermes.v1.DeliveryService/SendMessage": { profile: "alice", target: "bob", message: "hi" },
  "/hermes.v1.PeerService/Dm": { profile: "bob", input: "hi", sender_profile: "alice", sender_gateway: "gw-far", wait_seconds: 30 },
  "/hermes.v1.PeerService/StartRun": { profile: "bob", input: "hi", sender_profile: "alice", sender_gateway: "gw-far" },
  "/hermes.v1.RoomService/Send": { room_id: "main", event_id: "fuzz", payload: { text: "hi" } },
  "/hermes.v1.RoomService/Create": { room_id: "fuzz-room", name: "Fuzz", members: [{ member_id: "alice", profile: "alice" }] },
};

const transports = () => [
  { name: "tcp", client: tcp, metadata: () => authMetadata(KEY), services: SERVED },
  { name: "control socket", client: control, metadata: () => authMetadata(undefined), services: [...SERVED, "hermes.v1.ControlService"] },
];

function method(path: string): FuzzMethod {
  return fuzzMethods(["hermes.v1.GatewayService", "hermes.v1.DeliveryService", "hermes.v1.PeerService"]).find((m) => m.path === path)!;
}

function hermes(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [HERMES_BIN, ...args], { timeout: 30_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const expectRunning = (client: Client, context: string) => expectGatewayRunning(gw, client, context);

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "hgrpc-fuzz-"));
  gw = await startGatewayProcess(home, { env: { API_SERVER_KEY: KEY } });
  tcp = rawClient(gw.grpc);
  control = rawClient(`unix:${gw.ready.control}`);
  const create = method("/hermes.v1.GatewayService/CreateProfile");
  for (const name of ["alice", "bob"]) {
    const answer = await callRaw(control, create, create.encode({ name }), authMetadata(undefined));
    expect(answer.code, answer.details).toBe(0);
  }
  const room = fuzzMethods(["hermes.v1.RoomService"]).find((m) => m.path === "/hermes.v1.RoomService/Create")!;
  const members = [
    { member_id: "alice", profile: "alice" },
    { member_id: "bob", profile: "bob" },
  ];
  const created = await callRaw(control, room, room.encode({ room_id: "main", name: "Main", members }), authMetadata(undefined));
  expect(created.code, created.details).toBe(0);
});

afterAll(async () => {
  tcp?.close();
  control?.close();
  await gw?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
});

describe("non-ASCII error data does not end the gateway", () => {
  it("`hermes profile show josé` over the control socket is a typed refusal naming josé", async () => {
    const r = await hermes(["--home", home, "profile", "show", "josé"]);
    expect(r.stderr).toContain("josé");
    expect(r.stderr).not.toContain("Connection dropped");
    expect(r.code).toBe(2);
    await expectRunning(control, "profile show josé");
  });

  it("a message to zoë is unknown_target with the target and the teammates in its data", async () => {
    const send = method("/hermes.v1.DeliveryService/SendMessage");
    const answer = await callRaw(tcp, send, send.encode({ profile: "alice", target: "zoë", message: "hi" }), authMetadata(KEY));
    expect(answer.reason).toBe("unknown_target");
    expect(answer.details).toContain('"zoë"');
    expect(answer.data).toMatchObject({ target: "zoë", teammates: ["default", "bob"] });
    await expectRunning(tcp, "a message to zoë");
  });

  it("a peer idempotency key ticket-é-1 reused with other input is idempotency_conflict naming the key", async () => {
    const start = method("/hermes.v1.PeerService/StartRun");
    const run = (input: string) =>
      callRaw(
        tcp,
        start,
        start.encode({ profile: "bob", input, sender_profile: "alice", sender_gateway: "gw-far", idempotency_key: "ticket-é-1" }),
        authMetadata(KEY),
      );
    expect((await run("first")).code).toBe(0);
    const again = await run("other input");
    expect(again.reason).toBe("idempotency_conflict");
    expect(again.details).toContain('"ticket-é-1"');
    expect(again.data).toMatchObject({ idempotency_key: "ticket-é-1" });
    await expectRunning(tcp, "a reused idempotency key");
  });

  it("error text longer than a trailer can hold arrives shortened, with its start intact", async () => {
    const get = method("/hermes.v1.GatewayService/GetProfile");
    const name = `ü${"é".repeat(300_000)}`;
    const answer = await callRaw(control, get, get.encode({ name }), authMetadata(undefined));
    expect(answer.reason).toBe("invalid_name");
    expect(answer.details.length).toBeLessThan(3000);
    expect(answer.details).toContain("üéé");
    expect(JSON.stringify(answer.data).length).toBeLessThan(5000);
    await expectRunning(control, "a long name");
  });
});

describe("fuzzing every string field of every gateway method", () => {
  type Transport = ReturnType<typeof transports>[number];
  const fields = () =>
    transports().flatMap((transport) =>
      fuzzMethods([...transport.services, "grpc.health.v1.Health"]).flatMap((m) =>
        m.stringFields.map((field) => ({ transport, m, field })),
      ),
    );

  async function runCase({ transport, m, field }: { transport: Transport; m: FuzzMethod; field: FieldStep[] }, value: NastyValue) {
    const context = `${transport.name} ${m.path} ${fieldLabel(field)} = ${value.label}`;
    const request = Buffer.concat([m.encode(BASE_REQUESTS[m.path] ?? {}), encodeAt(field, value.bytes)]);
    expectTypedAnswer(await callRaw(transport.client, m, request, transport.metadata()), value, context);
    await expectRunning(transport.client, context);
  }

  it("answers each with OK or a typed error, and keeps serving", async () => {
    const cases = fields().flatMap((f) => NASTY_VALUES.map((value) => ({ f, value })));
    expect(cases.length).toBeGreaterThan(1500);
    await inBatches(cases, ({ f, value }) => runCase(f, value));
  });

  it("answers random text and bytes in random fields the same way (fast-check)", async () => {
    const all = fields();
    await fc.assert(
      fc.asyncProperty(fc.nat({ max: all.length - 1 }), randomValues, (i, value) =>
        runCase(all[i]!, { ...value, label: JSON.stringify([...value.bytes]) }),
      ),
      { numRuns: 150 },
    );
  });
});

describe("reflection", () => {
  it("lists exactly the services each port serves", async () => {
    expect(await reflectedServices(tcp)).toEqual([...SERVED, ...STANDARD].sort());
    expect(await reflectedServices(control)).toEqual([...SERVED, "hermes.v1.ControlService", ...STANDARD].sort());
  });
});
