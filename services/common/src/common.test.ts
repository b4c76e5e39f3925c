import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Metadata, status } from "@grpc/grpc-js";
import { assertProfileName, isValidId } from "@hermes/contract";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { apiKeyProblem, assertApiKey, bearerToken, KeyRing, secretsEqual } from "./auth.js";
import { Backoff } from "./backoff.js";
import { readEnvFile, readYamlFile } from "./config.js";
import { sharedFolderWarning, writeFileAtomic } from "./files.js";
import { fromServiceError, GRPC_STATUS_OF_REASON, toServiceError } from "./grpc-status.js";
import { type HostResolver, isLoopbackAddress, parseGrpcUrl, parseHostPort, plainTransportText, resolveListenAddress } from "./net.js";
import { backoffDelayMs } from "./pure/backoff.js";
import { validateConfig } from "./pure/config.js";
import { HermesError, REASONS, toHermesError, toWireError } from "./pure/errors.js";
import { type MigrationStep, migrationMessage } from "./pure/migration-step.js";
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
  });

  it("one rule for every API key: 16+ visible ASCII characters, no quotes; the message never shows the key", () => {
    expect(apiKeyProblem("0123456789abcdef")).toBeUndefined();
    expect(apiKeyProblem("a")).toBe("is 1 character long; at least 16 are needed (e.g. openssl rand -hex 24)");
    for (const bad of [
      "with a space 0123456789",
      "tab\there-0123456789",
      "0123456789abcdef\n",
      "nul\u0000-0123456789ab",
      "nbsp\u00a0-0123456789ab",
    ]) {
      expect(apiKeyProblem(bad), JSON.stringify(bad)).toMatch(/^contains whitespace or a control character/);
    }
    expect(apiKeyProblem("zoë-0123456789abcdef")).toMatch(/^contains a non-ASCII character/);
    expect(apiKeyProblem('"0123456789abcdef"')).toMatch(/^contains a quote/);
    expect(apiKeyProblem("x".repeat(4097))).toMatch(/at most 4096/);
    const refusal = (() => {
      try {
        assertApiKey("secret with space!", "API_SERVER_KEY (environment)");
      } catch (err) {
        return err as HermesError;
      }
    })();
    expect(refusal?.reason).toBe("invalid_config");
    expect(refusal?.message).toMatch(/^API_SERVER_KEY \(environment\) contains whitespace/);
    expect(refusal?.message).not.toContain("secret");
  });
});

describe("listen addresses are checked by what they resolve to", () => {
  /** A resolver answering from a table, recording every name it was asked. */
  function table(entries: Record<string, string[]>): HostResolver & { asked: string[] } {
    const asked: string[] = [];
    return Object.assign(
      async (host: string) => {
        asked.push(host);
        const found = entries[host];
        if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" });
        return found;
      },
      { asked },
    );
  }

  it("loopback means a loopback IP address, never a name", () => {
    for (const ip of ["127.0.0.1", "127.255.0.9", "::1", "[::1]", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1"])
      expect(isLoopbackAddress(ip), ip).toBe(true);
    for (const other of ["0.0.0.0", "::", "10.0.0.1", "::ffff:10.0.0.1", "localhost", "127.evil.example", ""]) {
      expect(isLoopbackAddress(other), other).toBe(false);
    }
  });

  it("a name that looks like loopback but resolves to 0.0.0.0 is not loopback, and binds the address that was checked", async () => {
    const resolver = table({
      "127.evil.example": ["0.0.0.0"],
      "split.example": ["127.0.0.1", "192.0.2.7"],
      "lo.example": ["127.0.0.1", "::1"],
    });
    expect(await resolveListenAddress("127.evil.example:7440", "--grpc", resolver)).toEqual({
      requested: "127.evil.example:7440",
      bind: { host: "0.0.0.0", port: 7440 },
      addresses: ["0.0.0.0"],
      loopback: false,
    });
    // Every address must be loopback.
    expect((await resolveListenAddress("split.example:1", "--grpc", resolver)).loopback).toBe(false);
    expect(await resolveListenAddress("lo.example:0", "--http", resolver)).toMatchObject({
      bind: { host: "127.0.0.1", port: 0 },
      loopback: true,
    });
    // An IP literal is not looked up.
    expect(await resolveListenAddress("[::1]:9", "--grpc", resolver)).toMatchObject({ bind: { host: "::1", port: 9 }, loopback: true });
    expect(resolver.asked).toEqual(["127.evil.example", "split.example", "lo.example"]);
    await expect(resolveListenAddress("nowhere.example:1", "--grpc", resolver)).rejects.toMatchObject({
      reason: "invalid_config",
      message: "--grpc nowhere.example:1: cannot resolve nowhere.example (ENOTFOUND); give an IP address such as 127.0.0.1",
    });
    await expect(resolveListenAddress("no-port", "--http", resolver)).rejects.toMatchObject({ reason: "invalid_config" });
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
  it("a raw ServiceError caught anywhere keeps its reason through toHermesError and toWireError", () => {
    // The pure errors module knows no gRPC; grpc-status.ts teaches it to read a ServiceError.
    const raw = { ...toServiceError(new HermesError("replica_gap", "behind", { data: { from_seq: 4 } })), message: "x", name: "Error" };
    expect(toHermesError(raw)).toMatchObject({ reason: "replica_gap", message: "behind", data: { from_seq: 4 } });
    expect(toWireError(raw)).toEqual({ reason: "replica_gap", message: "behind", data_json: '{"from_seq":4}' });
    expect(toHermesError({ code: 14, metadata: {} })).toMatchObject({ reason: "internal" }); // not a grpc-js Metadata: not a ServiceError
  });
  it("gives every reason a gRPC status", () => {
    expect(Object.keys(GRPC_STATUS_OF_REASON).sort()).toEqual(Object.keys(REASONS).sort());
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

  it.each([
    // What grpc-js 1.14 says, verbatim.
    ["No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:1. Resolution note: ", "connection refused"],
    ["No connection established. Last error: Error: connect ECONNREFUSED ::1:1. Resolution note: ", "connection refused"],
    ["No connection established. Last error: Error: connect ENOENT /h/gateway.sock. Resolution note: ", "no socket at /h/gateway.sock"],
    ["Name resolution failed for target dns:nonexistent.invalid:7440", "cannot resolve nonexistent.invalid"],
    ["Deadline exceeded after 1.501s,Waiting for LB pick", "no answer within 1.501 s"],
    ["Failed to connect before the deadline", "no connection before the deadline"],
    // Inside a longer message, the rest stays.
    [
      "cannot reach peer dead (grpc://127.0.0.1:1): No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:1. Resolution note: ",
      "cannot reach peer dead (grpc://127.0.0.1:1): connection refused",
    ],
    [
      "peer x is unreachable: No connection established. Last error: read ECONNRESET. Resolution note: ; retry",
      "peer x is unreachable: the connection was reset; retry",
    ],
    ["no bot called zed", "no bot called zed"],
  ])("grpc-js wording in %j reads %j", (raw, plain) => {
    expect(plainTransportText(raw)).toBe(plain);
  });
});

describe("files", () => {
  it("warns about a folder other users can read or write, and names the fix", () => {
    const open = join(dir, "open");
    mkdirSync(open);
    chmodSync(open, 0o755);
    expect(sharedFolderWarning(open, "HERMES_HOME")).toBe(
      `HERMES_HOME ${open} is open to other users (mode 0755): they can list it and read any file in it that is not 0600; run: chmod 700 ${open}`,
    );
    chmodSync(open, 0o750);
    expect(sharedFolderWarning(open, "HERMES_HOME")).toMatch(/mode 0750/);
    for (const quiet of [0o700, 0o711]) {
      chmodSync(open, quiet);
      expect(sharedFolderWarning(open, "HERMES_HOME"), quiet.toString(8)).toBeUndefined();
    }
  });
  it("writes files atomically and privately unless told otherwise", () => {
    const previous = process.umask(0o002);
    try {
      writeFileAtomic(join(dir, "secret"), "k=v\n");
      expect(statSync(join(dir, "secret")).mode & 0o777).toBe(0o600);
    } finally {
      process.umask(previous);
    }
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
  it("tells the caller of each migration an existing file needs, before and after; of none when it is new or current", () => {
    const file = join(dir, "steps.db");
    const steps: MigrationStep[] = [];
    openDatabase(file, { label: "steps.db", migrations, onMigration: (step) => steps.push(step) }).close();
    expect(steps).toEqual([]);
    const two = [...migrations, { version: 2, name: "u", up: (db: import("./sqlite.js").Db) => db.exec("CREATE TABLE u (y)") }];
    openDatabase(file, { label: "steps.db", migrations: two, onMigration: (step) => steps.push(step) }).close();
    expect(steps.map(({ ms, ...rest }) => rest)).toEqual([
      { label: "steps.db", path: file, version: 2, name: "u", phase: "start" },
      { label: "steps.db", path: file, version: 2, name: "u", phase: "done" },
    ]);
    expect(steps[1]!.ms).toBeGreaterThanOrEqual(0);
    expect(migrationMessage(steps[0]!)).toMatch(/^upgrading steps\.db at .* to schema version 2 \(u\): once.*nothing is lost/);
    expect(migrationMessage({ ...steps[1]!, ms: 7100 })).toBe(`upgraded steps.db at ${file} to schema version 2 (u) in 7.1 s`);
    steps.length = 0;
    openDatabase(file, { label: "steps.db", migrations: two, onMigration: (step) => steps.push(step) }).close();
    expect(steps).toEqual([]);
  });
  it("creates the database 0600 and SQLite's -wal/-shm follow it, even under a permissive umask; an existing 0644 one is tightened", () => {
    const previous = process.umask(0o002);
    try {
      const fresh = join(dir, "fresh.db");
      const db = openDatabase(fresh, { label: "fresh.db", migrations });
      db.exec("INSERT INTO t VALUES (1)");
      for (const f of [fresh, `${fresh}-wal`, `${fresh}-shm`]) expect(statSync(f).mode & 0o777, f).toBe(0o600);
      db.close();
      const old = join(dir, "old.db");
      openDatabase(old, { label: "old.db", migrations }).close();
      chmodSync(old, 0o644);
      openDatabase(old, { label: "old.db", migrations }).close();
      expect(statSync(old).mode & 0o777).toBe(0o600);
    } finally {
      process.umask(previous);
    }
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
