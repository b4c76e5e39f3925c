import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Metadata, status } from "@grpc/grpc-js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { bearerToken, isLoopbackHost, KeyRing, secretsEqual } from "./auth.js";
import { Backoff, backoffDelayMs } from "./backoff.js";
import { readEnvFile, readYamlFile, validateConfig } from "./config.js";
import { fromServiceError, HermesError, toServiceError } from "./errors.js";
import { assertProfileName, isValidId } from "./names.js";
import { parseGrpcUrl, parseHostPort } from "./net.js";
import { openDatabase } from "./sqlite.js";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "hermes-common-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("names", () => {
  it.each(["../x", "", "Upper", "a".repeat(65), ".hidden", "a/b", "-dash"])("refuses profile name %j with the rule", (name) => {
    expect(() => assertProfileName(name)).toThrow(/must match \^\[a-z0-9\]/);
  });
  it.each(["a", "bob", "a_b-c", "0", "a".repeat(64)])("accepts %j", (name) => expect(assertProfileName(name)).toBe(name));
  it("ids are bounded and path-safe", () => {
    expect(isValidId("room-1.a:b")).toBe(true);
    expect(isValidId("../etc")).toBe(false);
    expect(isValidId("a".repeat(129))).toBe(false);
  });
});

describe("auth", () => {
  it("compares secrets in constant time and parses bearer headers", () => {
    expect(secretsEqual("abc", "abc")).toBe(true);
    expect(secretsEqual("abc", "abd")).toBe(false);
    expect(secretsEqual("abc", "abcd")).toBe(false);
    expect(bearerToken("Bearer k1")).toBe("k1");
    expect(bearerToken("bearer   k1 ")).toBe("k1");
    expect(bearerToken("Basic k1")).toBeUndefined();
    const ring = new KeyRing(["one", "two"]);
    expect(ring.accepts("two")).toBe(true);
    expect(ring.accepts(undefined)).toBe(false);
    expect(new KeyRing([]).accepts(undefined)).toBe(true);
    expect(isLoopbackHost("127.0.0.1")).toBe(true);
    expect(isLoopbackHost("0.0.0.0")).toBe(false);
  });
});

describe("errors over gRPC", () => {
  it("round-trips reason and data through status and trailers", () => {
    const se = toServiceError(new HermesError("authority_conflict", "stale", { data: { authority: { gateway_id: "b", epoch: 3 } } }));
    expect(se.code).toBe(status.FAILED_PRECONDITION);
    const back = fromServiceError({ ...se, message: "x", name: "Error" } as never);
    expect(back.reason).toBe("authority_conflict");
    expect(back.data).toEqual({ authority: { gateway_id: "b", epoch: 3 } });
    expect(back.exitCode).toBe(2);
  });
  it("maps foreign statuses to transport reasons", () => {
    const unavailable = fromServiceError({ code: status.UNAVAILABLE, details: "down", metadata: new Metadata() } as never);
    expect(unavailable.reason).toBe("unavailable");
    expect(unavailable.exitCode).toBe(1);
  });
});

describe("config", () => {
  const schema = z.object({ gateway: z.object({ grpc: z.string() }).strict().optional() }).strict();
  it("names an unknown key in one message", () => {
    expect(() => validateConfig(schema, { gatway: {} }, "config.yaml")).toThrow('config.yaml: unknown key "gatway"');
    expect(() => validateConfig(schema, { gateway: { grpc: 5 } }, "config.yaml")).toThrow(/config.yaml: gateway.grpc:/);
  });
  it("reads YAML and .env files without interpreting values", () => {
    writeFileSync(join(dir, "c.yaml"), "a: 1\n");
    expect(readYamlFile(join(dir, "c.yaml"))).toEqual({ a: 1 });
    expect(readYamlFile(join(dir, "missing.yaml"))).toEqual({});
    writeFileSync(join(dir, "ids.yaml"), "overrides:\n  123456789012345678: {model: big}\n  n: 123456789012345678\n  small: 42\n");
    expect(readYamlFile(join(dir, "ids.yaml"))).toEqual({
      overrides: { "123456789012345678": { model: "big" }, n: "123456789012345678", small: 42 },
    });
    writeFileSync(join(dir, "bad.yaml"), "a: [\n");
    expect(() => readYamlFile(join(dir, "bad.yaml"))).toThrow(/not valid YAML/);
    writeFileSync(join(dir, ".env"), "# c\nA=1\nexport B='$(x)'\nC=\"q\"\n");
    expect(readEnvFile(join(dir, ".env"))).toEqual({ A: "1", B: "$(x)", C: "q" });
  });
});

describe("net", () => {
  it("parses addresses and gRPC URLs", () => {
    expect(parseHostPort("127.0.0.1:7440")).toEqual({ host: "127.0.0.1", port: 7440 });
    expect(parseHostPort("[::1]:1")).toEqual({ host: "::1", port: 1 });
    expect(() => parseHostPort("nope")).toThrow(/HOST:PORT/);
    expect(parseGrpcUrl("grpc://h:1")).toEqual({ target: "h:1", tls: false });
    expect(parseGrpcUrl("grpcs://h:1").tls).toBe(true);
    expect(() => parseGrpcUrl("http://h:1")).toThrow(/grpc:\/\//);
  });
});

describe("backoff", () => {
  it("grows to the cap and resets", () => {
    const b = new Backoff({ initialMs: 100, maxMs: 1000, multiplier: 2, jitter: 0 });
    expect([1, 2, 3, 4, 5].map(() => b.nextDelayMs())).toEqual([100, 200, 400, 800, 1000]);
    b.reset();
    expect(b.nextDelayMs()).toBe(100);
  });
  it("computes one delay from the attempt number, with the jitter drawn from the injected random", () => {
    const options = { initialMs: 1000, maxMs: 60_000, multiplier: 2, jitter: 0.2 };
    expect(backoffDelayMs(0, { ...options, random: () => 0.5 })).toBe(1000);
    expect(backoffDelayMs(3, { ...options, random: () => 0 })).toBe(6400);
    expect(backoffDelayMs(3, { ...options, random: () => 1 })).toBe(9600);
    expect(backoffDelayMs(30, { ...options, random: () => 0.5 })).toBe(60_000);
  });
});

describe("sqlite", () => {
  const migrations = [{ version: 1, name: "t", up: (db: import("./sqlite.js").Db) => db.exec("CREATE TABLE t (x)") }];
  it("opens in WAL with synchronous=FULL and migrates", () => {
    const db = openDatabase(join(dir, "a.db"), { label: "a.db", migrations });
    expect(db.pragma("journal_mode", { simple: true })).toBe("wal");
    expect(db.pragma("synchronous", { simple: true })).toBe(2);
    expect(db.pragma("user_version", { simple: true })).toBe(1);
    db.close();
  });
  it("refuses a corrupt file with a clear message and leaves it untouched", () => {
    const file = join(dir, "bad.db");
    writeFileSync(file, "this is not a database ".repeat(100));
    const before = readFileSync(file);
    expect(() => openDatabase(file, { label: "bad.db", migrations })).toThrow(/not a readable SQLite database.*Nothing was changed/);
    expect(readFileSync(file).equals(before)).toBe(true);
  });
  it("refuses a schema newer than this build", () => {
    const file = join(dir, "new.db");
    const db = openDatabase(file, { label: "new.db", migrations });
    db.pragma("user_version = 9");
    db.close();
    let err: HermesError | undefined;
    try {
      openDatabase(file, { label: "new.db", migrations });
    } catch (e) {
      err = e as HermesError;
    }
    expect(err?.reason).toBe("unsupported_schema");
    expect(err?.message).toMatch(/schema version 9.*versions up to 1/);
  });
});
