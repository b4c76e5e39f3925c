import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { HermesHome } from "../store/home.js";
import { DEFAULT_DB_BUSY_TIMEOUT_MS, DEFAULT_HTTP, DEFAULT_MAX_RPC_CONNECTIONS, resolveGatewaySettings } from "./config.js";

/** The `http:` keys of config.yaml and their environment override. */

const homes: string[] = [];
function homeWith(config: string): HermesHome {
  const root = mkdtempSync(join(tmpdir(), "hermes-config-"));
  homes.push(root);
  writeFileSync(join(root, "config.yaml"), config);
  return new HermesHome(root);
}
afterEach(() => {
  for (const root of homes.splice(0)) rmSync(root, { recursive: true, force: true });
});

describe("http settings", () => {
  it("default to no extra origins and the default connection cap", () => {
    const s = resolveGatewaySettings(homeWith(""), {}, {});
    expect(s.httpAllowedOrigins).toEqual([]);
    expect(s.maxRpcConnections).toBe(DEFAULT_MAX_RPC_CONNECTIONS);
  });

  it("read http.allowed_origins in canonical form and http.max_rpc_connections", () => {
    const s = resolveGatewaySettings(
      homeWith("http:\n  allowed_origins: [HTTPS://Ops.Example.com:443, 'http://127.0.0.1:8080/']\n  max_rpc_connections: 12\n"),
      {},
      {},
    );
    expect(s.httpAllowedOrigins).toEqual(["https://ops.example.com", "http://127.0.0.1:8080"]);
    expect(s.maxRpcConnections).toBe(12);
  });

  it("refuse an entry that is not an origin, naming the key", () => {
    expect(() => resolveGatewaySettings(homeWith("http:\n  allowed_origins: [https://ops.example.com/app]\n"), {}, {})).toThrow(
      /allowed_origins/,
    );
    expect(() => resolveGatewaySettings(homeWith("http:\n  max_rpc_connections: 0\n"), {}, {})).toThrow(/max_rpc_connections/);
  });

  it("take HERMES_HTTP_ALLOWED_ORIGINS (comma-separated) over the file, and check it the same way", () => {
    const home = homeWith("http:\n  allowed_origins: [https://ops.example.com]\n");
    const env = { HERMES_HTTP_ALLOWED_ORIGINS: " https://a.example , http://b.example:8080 " };
    expect(resolveGatewaySettings(home, {}, env).httpAllowedOrigins).toEqual(["https://a.example", "http://b.example:8080"]);
    expect(resolveGatewaySettings(home, {}, { HERMES_HTTP_ALLOWED_ORIGINS: "" }).httpAllowedOrigins).toEqual([]);
    expect(() => resolveGatewaySettings(home, {}, { HERMES_HTTP_ALLOWED_ORIGINS: "https://a.example,evil" })).toThrow(
      /HERMES_HTTP_ALLOWED_ORIGINS/,
    );
  });
});

describe("a2a settings", () => {
  it("serve by default with 15 s keep-alives; a public URL loses its trailing slash", () => {
    expect(resolveGatewaySettings(homeWith(""), {}, {}).a2a).toEqual({ enabled: true, keepAliveMs: 15_000 });
    const s = resolveGatewaySettings(
      homeWith("a2a:\n  enabled: false\n  public_url: https://bots.example.com/hermes/\n  keep_alive_seconds: 2\n"),
      {},
      {},
    );
    expect(s.a2a).toEqual({ enabled: false, publicUrl: "https://bots.example.com/hermes", keepAliveMs: 2000 });
  });

  it("refuse a bad public URL, caller or peer, naming the key", () => {
    for (const [yaml, key] of [
      ["a2a:\n  public_url: ftp://x\n", /public_url/],
      ["a2a:\n  callers:\n    partner: { key_env: 'not a var' }\n", /key_env/],
      ["a2a:\n  peers:\n    Weather: { url: https://x/ }\n", /peers/],
      ["a2a:\n  peers:\n    weather: { url: grpc://x:1 }\n", /url/],
      ["a2a:\n  unknown: 1\n", /unknown/],
    ] as const) {
      expect(() => resolveGatewaySettings(homeWith(yaml), {}, {})).toThrow(key);
    }
  });
});

describe("environment overrides", () => {
  it("a blank variable is not set: the file's value or the default holds", () => {
    const home = homeWith("gateway:\n  grpc: 127.0.0.1:7555\n  db_busy_timeout_ms: 250\n");
    writeFileSync(home.envFile, "HERMES_GATEWAY_ID=\n");
    const s = resolveGatewaySettings(home, {}, { HERMES_GRPC: "", HERMES_HTTP: "  ", HERMES_DB_BUSY_TIMEOUT_MS: "" });
    expect(s.grpc).toBe("127.0.0.1:7555");
    expect(s.http).toBe(DEFAULT_HTTP);
    expect(s.dbBusyTimeoutMs).toBe(250);
    expect(s.gatewayId).toBeUndefined();
  });

  it("a blank variable in the environment gives way to HERMES_HOME/.env", () => {
    const home = homeWith("");
    writeFileSync(home.envFile, "HERMES_GRPC=127.0.0.1:7666\n");
    expect(resolveGatewaySettings(home, {}, { HERMES_GRPC: "" }).grpc).toBe("127.0.0.1:7666");
  });

  it("rooms.commit_linger_ms: 4 ms unless the file or HERMES_COMMIT_LINGER_MS says otherwise (0 turns it off)", () => {
    expect(resolveGatewaySettings(homeWith(""), {}, {}).rooms.commitLingerMs).toBe(4);
    const home = homeWith("rooms:\n  commit_linger_ms: 0\n");
    expect(resolveGatewaySettings(home, {}, {}).rooms.commitLingerMs).toBe(0);
    expect(resolveGatewaySettings(home, {}, { HERMES_COMMIT_LINGER_MS: "10" }).rooms.commitLingerMs).toBe(10);
    for (const bad of ["-1", "2.5", "51"]) {
      expect(() => resolveGatewaySettings(home, {}, { HERMES_COMMIT_LINGER_MS: bad })).toThrow(
        expect.objectContaining({ reason: "invalid_config", message: expect.stringContaining("HERMES_COMMIT_LINGER_MS") }),
      );
    }
    expect(() => resolveGatewaySettings(homeWith("rooms:\n  commit_linger_ms: 51\n"), {}, {})).toThrow(
      expect.objectContaining({ reason: "invalid_config" }),
    );
  });

  it("HERMES_DB_BUSY_TIMEOUT_MS takes whole milliseconds within the file's bounds, else names itself", () => {
    const home = homeWith("");
    expect(resolveGatewaySettings(home, {}, {}).dbBusyTimeoutMs).toBe(DEFAULT_DB_BUSY_TIMEOUT_MS);
    expect(resolveGatewaySettings(home, {}, { HERMES_DB_BUSY_TIMEOUT_MS: " 0 " }).dbBusyTimeoutMs).toBe(0);
    expect(resolveGatewaySettings(home, {}, { HERMES_DB_BUSY_TIMEOUT_MS: "60000" }).dbBusyTimeoutMs).toBe(60_000);
    for (const bad of ["abc", "-1", "1.5", "1e3", "60001", "0x10"]) {
      expect(() => resolveGatewaySettings(home, {}, { HERMES_DB_BUSY_TIMEOUT_MS: bad })).toThrow(
        expect.objectContaining({
          reason: "invalid_config",
          message: expect.stringContaining(`HERMES_DB_BUSY_TIMEOUT_MS=${JSON.stringify(bad)}`),
        }),
      );
    }
  });
});
