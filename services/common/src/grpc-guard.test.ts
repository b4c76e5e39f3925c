import { Writable } from "node:stream";
import {
  type Client,
  credentials,
  Metadata,
  makeGenericClientConstructor,
  ServerCredentials,
  type ServerDuplexStream,
  type ServerWritableStream,
  type ServiceDefinition,
  type ServiceError,
  type sendUnaryData,
  status,
} from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adaptService, bindServer, GuardedServer } from "./grpc.js";
import { fromServiceError } from "./grpc-status.js";
import { createLogger } from "./logger.js";
import { type HermesError, HermesError as HermesErrorClass, MAX_ERROR_MESSAGE_CHARS } from "./pure/errors.js";

/**
 * Typed errors over real gRPC whatever their text, and a server no handler can bring down: every
 * way a handler can fail (a throw, a rejection, a listener that throws, an error that cannot be
 * encoded) is answered with a typed error. An exception escaping to Node would fail this file
 * (vitest reports it) before it could end a daemon.
 */

const json = {
  requestSerialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
  requestDeserialize: (b: Buffer) => JSON.parse(b.toString()) as unknown,
  responseSerialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
  responseDeserialize: (b: Buffer) => JSON.parse(b.toString()) as unknown,
};
const method = (name: string, requestStream: boolean, responseStream: boolean) => ({
  path: `/test.Probe/${name}`,
  requestStream,
  responseStream,
  originalName: name,
  ...json,
});
const Probe = {
  fail: method("fail", false, false),
  watch: method("watch", false, true),
  chat: method("chat", true, true),
} as unknown as ServiceDefinition;
const Raw = {
  unary: { ...method("unary", false, false), path: "/test.Raw/unary" },
  stream: { ...method("stream", false, true), path: "/test.Raw/stream" },
} as unknown as ServiceDefinition;

type How = { how: string };

function thrown(how: string): unknown {
  switch (how) {
    case "data":
      return new HermesErrorClass("invalid_name", 'invalid profile name "josé" (ｇｗ２, zoë😀, \u202Eשלום, a\u0000b)', {
        data: { name: "josé", fullwidth: "ｇｗ２", emoji: "zoë😀", rtl: "\u202Eשלום", nul: "a\u0000b" },
      });
    case "lone surrogate":
      return new HermesErrorClass("invalid_params", "bad \ud800 text");
    case "long":
      return new HermesErrorClass("invalid_params", `${"é".repeat(100_000)}!`);
    case "big data":
      return new HermesErrorClass("invalid_params", "big", { data: { blob: "é".repeat(100_000), keep: "small" } });
    case "bigint":
      return new HermesErrorClass("invalid_params", "bigint", { data: { n: 1n } });
    case "unknown reason":
      return new HermesErrorClass("no_such_reason" as never, "bogus");
    case "unprintable":
      return Object.create(null);
    default:
      return new Error(`plain ${how}`);
  }
}

const logged: string[] = [];
let server: GuardedServer;
let probe: Client & Record<string, (...args: unknown[]) => unknown>;
let raw: Client & Record<string, (...args: unknown[]) => unknown>;

beforeAll(async () => {
  const logger = createLogger(
    "guard-test",
    "error",
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        logged.push(chunk.toString());
        done();
      },
    }),
  );
  // HERMES_LOG_LEVEL (silent under npm test) overrides createLogger's level; this test reads the log.
  logger.level = "error";
  server = new GuardedServer(logger);
  server.addService(
    Probe,
    adaptService(
      Probe,
      {
        fail: (req: How) => {
          if (req.how === "sync") throw thrown("sync");
          return Promise.reject(thrown(req.how));
        },
        watch: (call: ServerWritableStream<How, unknown>) => {
          throw thrown(call.request.how);
        },
        chat: (call: ServerDuplexStream<How, unknown>) => {
          call.on("data", (req: How) => {
            throw thrown(req.how);
          });
        },
      } as never,
      { transport: "tcp" },
    ),
  );
  server.addService(Raw, {
    unary: (_call: unknown, callback: sendUnaryData<unknown>) => {
      callback(null, { first: true });
      callback(null, { second: true });
      throw new Error("after answering");
    },
    stream: () => Promise.reject(new Error("raw rejection")),
  });
  const port = await bindServer(server, "127.0.0.1:0", ServerCredentials.createInsecure());
  const address = `127.0.0.1:${port}`;
  probe = new (makeGenericClientConstructor(Probe, "Probe"))(address, credentials.createInsecure()) as typeof probe;
  raw = new (makeGenericClientConstructor(Raw, "Raw"))(address, credentials.createInsecure()) as typeof raw;
});

afterAll(() => {
  probe?.close();
  raw?.close();
  server?.forceShutdown();
});

function unary(client: typeof probe, name: string, req: How): Promise<{ error?: HermesError; reply?: unknown }> {
  return new Promise((resolve) =>
    client[name]!(req, new Metadata(), (err: ServiceError | null, reply: unknown) =>
      resolve(err ? { error: fromServiceError(err) } : { reply }),
    ),
  );
}

function streamError(call: { on(event: string, fn: (arg: never) => void): unknown }): Promise<HermesError> {
  return new Promise((resolve) => call.on("error", (err: ServiceError) => resolve(fromServiceError(err))));
}

describe("error text and data over gRPC", () => {
  it("carries non-ASCII, NUL and right-to-left text in the message and the data unchanged", async () => {
    const { error } = await unary(probe, "fail", { how: "data" });
    expect(error?.reason).toBe("invalid_name");
    expect(error?.message).toBe('invalid profile name "josé" (ｇｗ２, zoë😀, \u202Eשלום, a\u0000b)');
    expect(error?.data).toEqual({ name: "josé", fullwidth: "ｇｗ２", emoji: "zoë😀", rtl: "\u202Eשלום", nul: "a\u0000b" });
  });

  it("replaces a lone surrogate, which has no UTF-8 form, instead of failing to answer", async () => {
    const { error } = await unary(probe, "fail", { how: "lone surrogate" });
    expect(error?.reason).toBe("invalid_params");
    expect(error?.message).toBe("bad \uFFFD text");
  });

  it("shortens a message and data too large for a trailer, keeping their start", async () => {
    const long = await unary(probe, "fail", { how: "long" });
    expect(long.error?.reason).toBe("invalid_params");
    expect(long.error?.message.startsWith("é".repeat(MAX_ERROR_MESSAGE_CHARS))).toBe(true);
    expect(long.error?.message).toContain(`(${100_001 - MAX_ERROR_MESSAGE_CHARS} more characters)`);
    const big = await unary(probe, "fail", { how: "big data" });
    expect(big.error?.data.keep).toBe("small");
    expect(String(big.error?.data.blob).startsWith("éé")).toBe(true);
    expect(String(big.error?.data.blob).length).toBeLessThan(300);
  });

  it("answers an error whose data is not JSON, or whose reason is unknown, typed", async () => {
    const bigint = await unary(probe, "fail", { how: "bigint" });
    expect(bigint.error?.reason).toBe("invalid_params");
    expect(bigint.error?.data).toEqual({ data_omitted: expect.stringContaining("not JSON") });
    expect((await unary(probe, "fail", { how: "unknown reason" })).error?.reason).toBe("internal");
    expect((await unary(probe, "fail", { how: "unprintable" })).error?.reason).toBe("internal");
  });

  it("still reads data from the text trailer earlier builds sent", () => {
    const metadata = new Metadata();
    metadata.set("hermes-reason", "not_authority");
    metadata.set("hermes-error-data", JSON.stringify({ authority: { gateway_id: "gw-b", epoch: 2 } }));
    const e = fromServiceError({ code: status.FAILED_PRECONDITION, details: "elsewhere", metadata } as ServiceError);
    expect(e.reason).toBe("not_authority");
    expect(e.data).toEqual({ authority: { gateway_id: "gw-b", epoch: 2 } });
  });
});

describe("a guarded server", () => {
  it("answers a synchronous throw in a unary handler typed", async () => {
    const { error } = await unary(probe, "fail", { how: "sync" });
    expect(error?.reason).toBe("internal");
    expect(error?.message).toBe("plain sync");
  });

  it("ends a stream whose handler throws, or whose listener throws, with a typed error", async () => {
    const watched = await streamError(probe.watch!({ how: "data" }, new Metadata()) as never);
    expect(watched.reason).toBe("invalid_name");
    expect(watched.data.name).toBe("josé");
    const chat = probe.chat!(new Metadata()) as { write(v: How): void; on(event: string, fn: (arg: never) => void): unknown };
    const ended = streamError(chat);
    chat.write({ how: "listener" });
    const e = await ended;
    expect(e.reason).toBe("internal");
    expect(e.message).toBe("plain listener");
  });

  it("keeps the first answer of a raw handler that answers twice and then throws, and logs the throw", async () => {
    expect(await unary(raw, "unary", { how: "" })).toEqual({ reply: { first: true } });
    const e = await streamError(raw.stream!({ how: "" }, new Metadata()) as never);
    expect(e.reason).toBe("internal");
    expect(e.message).toBe("raw rejection");
    expect(logged.join("")).toContain("after answering");
    expect(logged.join("")).toContain("raw rejection");
  });

  it("lists the services added, in order", () => {
    expect(server.services).toEqual(["test.Probe", "test.Raw"]);
  });
});
