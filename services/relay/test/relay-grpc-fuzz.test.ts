import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@grpc/grpc-js";
import { authMetadata, isErrorReason } from "@hermes/common";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DaemonProcess, startRelayProcess } from "../../../test/support/daemons.js";
import {
  callRaw,
  encodeAt,
  expectRunning as expectRelayRunning,
  expectTypedAnswer,
  type FieldStep,
  type FuzzAnswer,
  type FuzzMethod,
  fieldLabel,
  fuzzMethods,
  inBatches,
  NASTY_VALUES,
  type NastyValue,
  randomValues,
  rawClient,
  reflectedServices,
} from "../../../test/support/grpc-fuzz.js";

/**
 * The relay PROCESS against text grpc-js trailers cannot hold as it is, in every string field of
 * every method: RelayService on TCP (the hello frame and every other frame on Connect, Tunnel,
 * TunnelStream) and RelayAdminService on the control socket. After each call a health check must
 * answer; every answer, and every error inside a frame, is typed.
 */

const STANDARD = ["grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"];

let dir: string;
let relay: DaemonProcess;
let tcp: Client;
let control: Client;
let key: string;

const methods = () => fuzzMethods(["hermes.v1.RelayService", "hermes.v1.RelayAdminService", "grpc.health.v1.Health"]);
const method = (path: string): FuzzMethod => methods().find((m) => m.path === path)!;

function helloFrame(hello: { connection: string; gateway_id: string }): Buffer {
  return method("/hermes.v1.RelayService/Connect").encode({ hello: { ...hello, version: "fuzz" } });
}

const HELLO = helloFrame({ connection: "gw1", gateway_id: "gw-1" });

/** Errors the relay sent inside frames (refused frames, refused sends) carry a known reason. */
function expectTypedFrames(answer: FuzzAnswer, context: string): void {
  for (const frame of answer.messages as { error?: { error?: { reason: string } }; ack?: { error?: { reason: string } } }[]) {
    const error = frame.error?.error ?? frame.ack?.error;
    if (error) expect(isErrorReason(error.reason), `${context}: frame error reason ${error.reason}`).toBe(true);
  }
}

const expectRunning = (client: Client, context: string) => expectRelayRunning(relay, client, context);

/** One fuzzed request: what is sent, where, and with which key. */
function fuzzCall(m: FuzzMethod, field: FieldStep[], value: NastyValue) {
  const raw = encodeAt(field, value.bytes);
  switch (m.path) {
    // A fuzzed hello is the first frame; any other fuzzed frame follows a valid hello.
    case "/hermes.v1.RelayService/Connect":
      return { client: tcp, key, request: field[0]!.name === "hello" ? [Buffer.concat([HELLO, raw])] : [HELLO, raw] };
    case "/hermes.v1.RelayService/Tunnel":
    case "/hermes.v1.RelayService/TunnelStream":
      return {
        client: tcp,
        key,
        request: [Buffer.concat([m.encode({ connection: "gw2", method: "groups.log", params_json: "{}" }), raw])],
      };
    default:
      return { client: m.service === "hermes.v1.RelayAdminService" ? control : tcp, key: undefined, request: [raw] };
  }
}

async function runCase(m: FuzzMethod, field: FieldStep[], value: NastyValue): Promise<void> {
  const context = `${m.path} ${fieldLabel(field)} = ${value.label}`;
  const { client, key: callKey, request } = fuzzCall(m, field, value);
  const answer = await callRaw(client, m, request, authMetadata(callKey), { wholeStream: m.clientStream, timeoutMs: 15_000 });
  expectTypedAnswer(answer, value, context);
  expectTypedFrames(answer, context);
  await expectRunning(client, context);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "hrelay-fuzz-"));
  relay = await startRelayProcess(dir);
  tcp = rawClient(relay.grpc);
  control = rawClient(`unix:${relay.ready.control}`);
  const add = method("/hermes.v1.RelayAdminService/AddKey");
  const answer = await callRaw(control, add, add.encode({ connection: "gw1" }), authMetadata(undefined));
  expect(answer.code, answer.details).toBe(0);
  key = (answer.messages[0] as { key: string }).key;
});

afterAll(async () => {
  tcp?.close();
  control?.close();
  await relay?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("non-ASCII in a hello does not leave the stream hanging", () => {
  /** A stream with gw1's key whose first frame is this hello, read to its end. */
  const hello = (connection: string, gateway_id: string) =>
    callRaw(tcp, method("/hermes.v1.RelayService/Connect"), [helloFrame({ connection, gateway_id })], authMetadata(key), {
      wholeStream: true,
      timeoutMs: 10_000,
    });

  it("a hello naming connection ｇｗ２ with gw1's key is refused unauthenticated, naming both", async () => {
    const answer = await hello("ｇｗ２", "gw-1");
    expect(answer.reason).toBe("unauthenticated");
    expect(answer.details).toContain('"ｇｗ２"');
    expect(answer.data).toEqual({ key_connection: "gw1", hello_connection: "ｇｗ２" });
    await expectRunning(tcp, "hello ｇｗ２");
  });

  it("a hello naming gateway id ｇｗ２ is refused invalid_params, showing the id as sent", async () => {
    const answer = await hello("gw1", "ｇｗ２");
    expect(answer.reason).toBe("invalid_params");
    expect(answer.details).toContain('"ｇｗ２"');
    expect(answer.data).toEqual({ field: "gateway_id" });
    await expectRunning(tcp, "gateway id ｇｗ２");
  });
});

describe("fuzzing every string field of every relay method", () => {
  const fields = () => methods().flatMap((m) => m.stringFields.map((field) => ({ m, field })));

  it("answers each with OK or a typed error, and keeps serving", async () => {
    const cases = fields().flatMap((f) => NASTY_VALUES.map((value) => ({ ...f, value })));
    expect(cases.length).toBeGreaterThan(300);
    await inBatches(cases, ({ m, field, value }) => runCase(m, field, value));
  });

  it("answers random text and bytes in random fields the same way (fast-check)", async () => {
    const all = fields();
    await fc.assert(
      fc.asyncProperty(fc.nat({ max: all.length - 1 }), randomValues, (i, value) =>
        runCase(all[i]!.m, all[i]!.field, { ...value, label: JSON.stringify([...value.bytes]) }),
      ),
      { numRuns: 100 },
    );
  });
});

describe("reflection", () => {
  it("lists exactly the services each port serves", async () => {
    expect(await reflectedServices(tcp)).toEqual(["hermes.v1.RelayService", ...STANDARD].sort());
    expect(await reflectedServices(control)).toEqual(["hermes.v1.RelayAdminService", ...STANDARD].sort());
  });
});
