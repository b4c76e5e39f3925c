import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Client, credentials, Metadata, type ServiceError, status } from "@grpc/grpc-js";
import { loadSync, type MethodDefinition, type PackageDefinition } from "@grpc/proto-loader";
import { fromServiceError, isErrorReason } from "@hermes/common";
import { PROTO_DIR, protoFiles } from "@hermes/proto";
import fc from "fast-check";
import { expect } from "vitest";
import type { DaemonProcess } from "./daemons.js";

/**
 * Fuzzing every string field of every gRPC method by hand-built request bytes: the .proto files
 * are read (as a client that only has them would) to find each method's string fields, and a
 * field's bytes are written raw, so a server sees text no encoder would produce (invalid UTF-8).
 */

export interface FieldStep {
  name: string;
  number: number;
}

/** `envelope.delivery_id` */
export function fieldLabel(path: FieldStep[]): string {
  return path.map((step) => step.name).join(".");
}

export interface FuzzMethod {
  /** `/hermes.v1.RoomService/Send` */
  path: string;
  service: string;
  clientStream: boolean;
  serverStream: boolean;
  /** Every string field, as the path of fields leading to it (`envelope.delivery_id`). */
  stringFields: FieldStep[][];
  encode(request: object): Buffer;
  decode(response: Buffer): Record<string, unknown>;
}

interface DescriptorField {
  name: string;
  number: number;
  type: string;
  typeName: string;
}

let loaded: PackageDefinition | undefined;

function definitions(): PackageDefinition {
  loaded ??= loadSync(protoFiles(), { includeDirs: [PROTO_DIR], keepCase: true, longs: Number, enums: String, oneofs: true });
  return loaded;
}

function messageFields(fullName: string): DescriptorField[] | undefined {
  const entry = definitions()[fullName] as { type?: { field: DescriptorField[] } } | undefined;
  return entry?.type?.field;
}

/** String fields of a message and of the messages inside it (3 levels deep, no cycles). */
function stringFieldPaths(fullName: string, seen: string[] = []): FieldStep[][] {
  const pkg = fullName.split(".").slice(0, -1).join(".");
  const paths: FieldStep[][] = [];
  for (const field of messageFields(fullName) ?? []) {
    const step = { name: field.name, number: field.number };
    if (field.type === "TYPE_STRING") paths.push([step]);
    if (field.type !== "TYPE_MESSAGE" || seen.length >= 3) continue;
    const inner = [`${pkg}.${field.typeName}`, field.typeName.replace(/^\./, "")].find((name) => messageFields(name) !== undefined);
    if (inner === undefined || seen.includes(inner)) continue;
    for (const path of stringFieldPaths(inner, [...seen, fullName])) paths.push([step, ...path]);
  }
  return paths;
}

/** Every method of the given services (full names, e.g. `hermes.v1.RoomService`). */
export function fuzzMethods(services: string[]): FuzzMethod[] {
  return services.flatMap((service) => {
    const definition = definitions()[service] as Record<string, MethodDefinition<object, object>> | undefined;
    if (definition === undefined) throw new Error(`no service ${service} in the .proto files`);
    const pkg = service.split(".").slice(0, -1).join(".");
    return Object.values(definition).map((m) => ({
      path: m.path,
      service,
      clientStream: m.requestStream,
      serverStream: m.responseStream,
      stringFields: stringFieldPaths(`${pkg}.${(m.requestType.type as { name: string }).name}`),
      encode: (request: object) => m.requestSerialize(request),
      decode: (response: Buffer) => m.responseDeserialize(response) as Record<string, unknown>,
    }));
  });
}

function varint(value: number): Buffer {
  const bytes: number[] = [];
  let v = value;
  while (v > 0x7f) {
    bytes.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  bytes.push(v);
  return Buffer.from(bytes);
}

function lengthDelimited(fieldNumber: number, content: Buffer): Buffer {
  return Buffer.concat([varint((fieldNumber << 3) | 2), varint(content.length), content]);
}

/**
 * The protobuf bytes of a message whose field at `path` holds exactly `bytes`. Appended to another
 * message's bytes it overrides that field (protobuf merges a repeated nested message and keeps
 * the last value of a string), so a valid base request can carry one raw field.
 */
export function encodeAt(path: FieldStep[], bytes: Buffer): Buffer {
  return path.reduceRight((inner, step) => lengthDelimited(step.number, inner), bytes);
}

export interface NastyValue {
  label: string;
  bytes: Buffer;
  /** The text the bytes stand for, when they are valid UTF-8. */
  text?: string;
}

/** A value from text; `text` only when it is well-formed (a lone surrogate is encoded as U+FFFD). */
export const textValue = (label: string, value: string): NastyValue => {
  const bytes = Buffer.from(value, "utf8");
  return bytes.toString("utf8") === value ? { label, bytes, text: value } : { label, bytes };
};

/** Text that has ended Hermes daemons or that grpc-js metadata and percent-encoding cannot take as it is. */
export const NASTY_VALUES: NastyValue[] = [
  textValue("latin accent", "josé"),
  textValue("fullwidth", "ｇｗ２"),
  textValue("emoji first", "😀zoë"),
  textValue("right-to-left", "\u202Eשלום-ابحث"),
  textValue("NUL", "a\u0000b"),
  textValue("JSON lone surrogate", '{"room_id":"\\ud800","text":"\\udc00x"}'),
  textValue("long", `${"é".repeat(60_000)}end`),
  { label: "invalid UTF-8", bytes: Buffer.from([0x61, 0xff, 0xfe, 0xc3, 0x28, 0x80, 0x62]) },
  { label: "encoded surrogate", bytes: Buffer.from([0x78, 0xed, 0xa0, 0x80, 0x79]) },
];

/** Random text (any code points, lone surrogates included) and random bytes, for fast-check. */
export const randomValues: fc.Arbitrary<NastyValue> = fc.oneof(
  fc.string({ unit: "binary", maxLength: 64 }).map((s) => textValue("text", s)),
  fc.uint8Array({ maxLength: 64 }).map((b) => ({ label: "bytes", bytes: Buffer.from(b) })),
);

/**
 * Runs `check` over every item, a few at a time: the run stays short, and a check that follows a
 * call with a health check still does so for each call.
 */
export async function inBatches<T>(items: T[], check: (item: T) => Promise<void>, size = 12): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(check));
}

export interface FuzzAnswer {
  code: number;
  details: string;
  reason?: string;
  data: Record<string, unknown>;
  /** The response messages received, decoded. */
  messages: Record<string, unknown>[];
}

export interface CallOptions {
  timeoutMs?: number;
  /** Read a stream to its end instead of cancelling it after the first message. */
  wholeStream?: boolean;
}

/**
 * One call with raw request bytes (several messages for a client stream, then a half-close): a
 * unary answer, or a stream's first message (the stream is then cancelled) or all of it.
 */
export function callRaw(
  client: Client,
  method: FuzzMethod,
  request: Buffer | Buffer[],
  metadata: Metadata,
  options: CallOptions = {},
): Promise<FuzzAnswer> {
  const requests = Array.isArray(request) ? request : [request];
  const callOptions = { deadline: new Date(Date.now() + (options.timeoutMs ?? 20_000)) };
  const identity = (b: Buffer) => b;
  const messages: Record<string, unknown>[] = [];
  const ok = (): FuzzAnswer => ({ code: status.OK, details: "", data: {}, messages });
  return new Promise((resolve) => {
    const failed = (err: ServiceError) =>
      resolve({
        code: err.code,
        details: err.details,
        reason: err.metadata.get("hermes-reason")[0] as string | undefined,
        data: fromServiceError(err).data,
        messages,
      });
    const writeAll = (call: { write(b: Buffer): void; end(): void }) => {
      for (const r of requests) call.write(r);
      call.end();
    };
    if (!method.serverStream) {
      const done = (err: ServiceError | null, response?: Buffer) => {
        if (err) return failed(err);
        messages.push(method.decode(response!));
        resolve(ok());
      };
      if (method.clientStream) writeAll(client.makeClientStreamRequest(method.path, identity, identity, metadata, callOptions, done));
      else client.makeUnaryRequest(method.path, identity, identity, requests[0]!, metadata, callOptions, done);
      return;
    }
    const call = method.clientStream
      ? client.makeBidiStreamRequest(method.path, identity, identity, metadata, callOptions)
      : client.makeServerStreamRequest(method.path, identity, identity, requests[0]!, metadata, callOptions);
    let settled = false;
    call.on("data", (response: Buffer) => {
      messages.push(method.decode(response));
      if (settled || options.wholeStream) return;
      settled = true;
      resolve(ok());
      call.cancel();
    });
    call.on("error", (err: ServiceError) => {
      if (settled) return;
      settled = true;
      failed(err);
    });
    call.on("status", (s: { code: number }) => {
      if (settled || s.code !== status.OK) return;
      settled = true;
      resolve(ok());
    });
    if (method.clientStream) writeAll(call as unknown as { write(b: Buffer): void; end(): void });
  });
}

/**
 * The answer is a success or a typed Hermes error, and error text that echoes the input shows it as
 * it was sent: not percent-encoded, not read as Latin-1, no replacement characters for valid text.
 */
export function expectTypedAnswer(answer: FuzzAnswer, value: NastyValue, context: string): void {
  if (answer.code === status.OK) return;
  expect(isErrorReason(answer.reason), `${context}: no hermes-reason on ${status[answer.code]}: ${answer.details.slice(0, 300)}`).toBe(
    true,
  );
  const shown = `${answer.details} ${JSON.stringify(answer.data)}`;
  const sent = value.bytes.toString("utf8");
  for (const mangled of [/%[0-9A-F]{2}/, /[ÃÂ]/]) {
    if (!mangled.test(sent)) expect(shown, `${context}: mangled error text`).not.toMatch(mangled);
  }
  // Valid text turns into U+FFFD only where a message quotes half of a surrogate pair (V8's
  // JSON.parse errors quote one UTF-16 unit); the text itself must then be shown as it was sent.
  if (value.text !== undefined && !sent.includes("\uFFFD") && !value.text.includes("\\ud") && shown.includes("\uFFFD")) {
    expect(shown, `${context}: replacement character for valid text`).toContain(value.text);
  }
}

/** The daemon process has not exited and answers a health check on `client`'s port. */
export async function expectRunning(daemon: DaemonProcess, client: Client, context: string): Promise<void> {
  expect(daemon.child.exitCode, `exited after ${context}: ${daemon.output().stderr.slice(-2000)}`).toBeNull();
  await expectServing(client, context);
}

/** A health check of the whole server (no key needed): the process is up and answering. */
async function expectServing(client: Client, context: string): Promise<void> {
  const answer = await new Promise<{ code: number; details: string }>((resolve) =>
    client.makeUnaryRequest(
      "/grpc.health.v1.Health/Check",
      (b: Buffer) => b,
      (b: Buffer) => b,
      Buffer.alloc(0),
      new Metadata(),
      { deadline: new Date(Date.now() + 10_000) },
      (err) => resolve(err ? { code: err.code, details: err.details } : { code: status.OK, details: "" }),
    ),
  );
  expect(answer, `health check after ${context}`).toEqual({ code: status.OK, details: "" });
}

/** A generic client for raw calls; `unix:/path` or `host:port`. */
export function rawClient(address: string): Client {
  return new Client(address, credentials.createInsecure(), { "grpc.max_receive_message_length": 16 * 1024 * 1024 });
}

/** The services a server lists through reflection (v1 and v1alpha must agree). */
export async function reflectedServices(client: Client): Promise<string[]> {
  const reflection = loadSync(["grpc/reflection/v1/reflection.proto", "grpc/reflection/v1alpha/reflection.proto"], {
    includeDirs: [join(dirname(createRequire(import.meta.url).resolve("@grpc/reflection")), "../proto")],
    keepCase: true,
    oneofs: true,
  });
  const lists: string[][] = [];
  for (const version of ["v1", "v1alpha"]) {
    const info = (reflection[`grpc.reflection.${version}.ServerReflection`] as Record<string, MethodDefinition<object, object>>)
      .ServerReflectionInfo!;
    const names = await new Promise<string[]>((resolve, reject) => {
      const call = client.makeBidiStreamRequest(info.path, info.requestSerialize, info.responseDeserialize, new Metadata(), {
        deadline: new Date(Date.now() + 10_000),
      });
      call.on("data", (response: { list_services_response?: { service: { name: string }[] } }) => {
        resolve((response.list_services_response?.service ?? []).map((s) => s.name).sort());
        call.end();
      });
      call.on("error", reject);
      call.write({ list_services: "*" });
    });
    lists.push(names);
  }
  expect(lists[1], "v1alpha lists what v1 lists").toEqual(lists[0]);
  return lists[0]!;
}
