import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { HermesHome } from "../store/home.js";
import { DEFAULT_MAX_RPC_CONNECTIONS, resolveGatewaySettings } from "./config.js";

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
