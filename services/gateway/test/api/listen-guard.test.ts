import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger, type HostResolver } from "@hermes/common";
import { Relay } from "@hermes/relay";
import { afterEach, describe, expect, it } from "vitest";
import { Gateway } from "../../src/daemon/gateway.js";
import { failure } from "../support/peers-fixtures.js";

/**
 * The loopback guard checks addresses, not names: a listen host is resolved once, every address
 * must be loopback for a keyless gateway, and the daemon binds the address that was checked. The
 * resolver is injected, so names that would need DNS or /etc/hosts answer from a table here.
 */

const dirs: string[] = [];
const running: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  for (const d of running.splice(0)) await d.stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

/** Answers from a table; a name it does not know does not exist (so a second, unchecked lookup would fail). */
function table(entries: Record<string, string[]>): HostResolver {
  return async (host) => {
    const found = entries[host];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" });
    return found;
  };
}

const RESOLVER = table({
  "127.evil.example": ["0.0.0.0"],
  "half.example": ["127.0.0.1", "192.0.2.7"],
  "lo.example": ["127.0.0.1"],
});

async function startGateway(grpc: string, http: string, env: Record<string, string> = {}, home = tempDir("hguard-")): Promise<Gateway> {
  const gw = await Gateway.start({
    home,
    overrides: { grpc, http },
    logger: createLogger("gateway", "silent"),
    env,
    resolver: RESOLVER,
  });
  running.push(gw);
  return gw;
}

describe("a keyless gateway binds loopback addresses only", () => {
  it.each([
    ["--grpc", "127.evil.example:0", "127.0.0.1:0", "127.evil.example:0 (resolves to 0.0.0.0)"],
    ["--http", "127.0.0.1:0", "127.evil.example:0", "127.evil.example:0 (resolves to 0.0.0.0)"],
    ["--grpc", "half.example:0", "127.0.0.1:0", "half.example:0 (resolves to 127.0.0.1, 192.0.2.7)"],
  ])("%s %s is refused, naming what the name resolves to; nothing listens", async (_flag, grpc, http, described) => {
    const home = tempDir("hguard-");
    const err = await failure(startGateway(grpc, http, {}, home));
    expect(err.reason).toBe("invalid_config");
    expect(err.message).toContain(`refusing to listen on ${described} without an API key`);
    expect(err.message).toContain("API_SERVER_KEY");
    expect(existsSync(join(home, "gateway.sock"))).toBe(false);
  });

  it("a name resolving to loopback is allowed, and the gateway binds the checked address (no second lookup)", async () => {
    const gw = await startGateway("lo.example:0", "lo.example:0");
    // lo.example exists only in the injected table: binding the name itself would have failed.
    expect(gw.grpcAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(gw.httpAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    const res = await fetch(`http://${gw.httpAddress}/livez`);
    expect(res.status).toBe(200);
  });

  it("a name that does not resolve is a config error naming it", async () => {
    const err = await failure(startGateway("nowhere.example:0", "127.0.0.1:0"));
    expect(err).toMatchObject({ reason: "invalid_config" });
    expect(err.message).toContain("--grpc nowhere.example:0: cannot resolve nowhere.example");
  });
});

describe("one rule for every API key source", () => {
  it.each([
    ["API_SERVER_KEY=a (environment)", { API_SERVER_KEY: "a" }, "", /^API_SERVER_KEY \(environment\) is 1 character long; at least 16/],
    [
      "API_SERVER_KEY with a space (environment)",
      { API_SERVER_KEY: "correct horse battery staple" },
      "",
      /^API_SERVER_KEY \(environment\) contains whitespace/,
    ],
    ["API_SERVER_KEY=a in HERMES_HOME/.env", {}, "API_SERVER_KEY=a\n", /^API_SERVER_KEY \(.*\/\.env\) is 1 character long/],
  ])("%s is refused, whatever the bind", async (_what, env, dotenv, message) => {
    const home = tempDir("hguard-");
    if (dotenv) writeFileSync(join(home, ".env"), dotenv);
    for (const bind of ["127.0.0.1:0", "0.0.0.0:0"]) {
      const err = await failure(startGateway(bind, "127.0.0.1:0", env, home));
      expect(err.reason).toBe("invalid_config");
      expect(err.message).toMatch(message);
      expect(err.message).not.toContain("horse");
    }
  });

  it("gateway.api_key in config.yaml follows the same rule (a space is refused, not silently unusable)", async () => {
    const home = tempDir("hguard-");
    writeFileSync(join(home, "config.yaml"), 'gateway:\n  api_key: "correct horse battery staple"\n');
    const err = await failure(startGateway("127.0.0.1:0", "127.0.0.1:0", {}, home));
    expect(err.reason).toBe("invalid_config");
    expect(err.message).toBe(
      `${join(home, "config.yaml")}: gateway.api_key: the key contains whitespace or a control character, so it could never match what a client sends (authorization: Bearer KEY); remove it`,
    );
  });
});

describe("the relay binds the address it resolved", () => {
  it("a name is resolved once and the relay listens on its address", async () => {
    const relay = await Relay.start({
      dataDir: tempDir("hguard-relay-"),
      overrides: { grpc: "lo.example:0", http: "lo.example:0" },
      logger: createLogger("relay", "silent"),
      env: {},
      resolver: RESOLVER,
    });
    running.push(relay);
    expect(relay.grpcAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(relay.httpAddress).toMatch(/^127\.0\.0\.1:\d+$/);
  });
});
