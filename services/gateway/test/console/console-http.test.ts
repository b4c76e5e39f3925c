import { request } from "node:http";
import { credentials } from "@grpc/grpc-js";
import { OpsServiceClient } from "@hermes/proto/hermes/v1/ops";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { call, startTestGateway, TEST_KEY, type TestGateway } from "../support/gateway-harness.js";

/**
 * The console's doors, as a browser or an attacker meets them: the login form and its origin
 * check, the session cookie (HttpOnly, SameSite=Strict, server-side, expiring, logout), forged
 * and expired cookies, oversized form posts, the /rpc upgrade with a cookie, one-time login links
 * from the control socket only, and the ops methods over gRPC.
 */

let now = Date.parse("2026-03-01T10:00:00.000Z");
const clock = { now: () => now };
let gw: TestGateway;
let origin: string;
let cookieName: string;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function http(method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  const [host, port] = gw.gateway.httpAddress.split(":");
  return new Promise((resolve, reject) => {
    const req = request({ host, port: Number(port), method, path, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (d: string) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
const FORM = "application/x-www-form-urlencoded";

async function login(fields: Record<string, string> = { key: TEST_KEY }): Promise<Answer> {
  return http("POST", "/login", { origin, "content-type": FORM }, form(fields));
}

function sessionCookie(a: Answer): string {
  const set = ([] as string[]).concat(a.headers["set-cookie"] ?? []);
  const cookie = set.find((c) => c.startsWith(`${cookieName}=`));
  if (!cookie) throw new Error(`no session cookie in ${JSON.stringify(a.headers)}`);
  return cookie.split(";")[0]!;
}

/** Opens /rpc with these headers: "open", or the refusal's status. */
function upgrade(headers: Record<string, string>): Promise<"open" | number> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`ws://${gw.gateway.httpAddress}/rpc`, { headers });
    ws.once("open", () => {
      ws.close();
      resolve("open");
    });
    ws.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
    ws.once("error", () => undefined);
  });
}

beforeAll(async () => {
  gw = await startTestGateway({ overrides: { id: "gw-console" }, clock });
  origin = `http://${gw.gateway.httpAddress}`;
  cookieName = "hermes_console_gw-console";
});

afterAll(async () => {
  await gw?.destroy();
});

describe("console login", () => {
  it("sends a visitor without a session to the login form, which needs no session", async () => {
    const page = await http("GET", "/");
    expect(page.status).toBe(303);
    expect(page.headers.location).toBe("/login");
    const asset = await http("GET", "/assets/anything.js");
    expect(asset.status).toBe(401);
    const form = await http("GET", "/login");
    expect(form.status).toBe(200);
    expect(form.body).toContain('name="key"');
    expect(form.headers["content-security-policy"]).toContain("frame-ancestors 'none'");
    expect(form.headers["x-frame-options"]).toBe("DENY");
  });

  it("refuses a wrong key, a login without Origin and one from another origin", async () => {
    const wrong = await login({ key: "not-the-key-0123456789" });
    expect(wrong.status).toBe(401);
    expect(wrong.body).toContain("Wrong key.");
    expect(wrong.headers["set-cookie"]).toBeUndefined();
    const noOrigin = await http("POST", "/login", { "content-type": FORM }, form({ key: TEST_KEY }));
    expect(noOrigin.status).toBe(403);
    expect(noOrigin.headers["set-cookie"]).toBeUndefined();
    const foreign = await http("POST", "/login", { origin: "http://evil.example", "content-type": FORM }, form({ key: TEST_KEY }));
    expect(foreign.status).toBe(403);
    // A browser that was told no-referrer sends `Origin: null`: refused too.
    expect((await http("POST", "/login", { origin: "null", "content-type": FORM }, form({ key: TEST_KEY }))).status).toBe(403);
  });

  it("refuses an oversized form post unread, and a body that is not the form", async () => {
    const big = await http("POST", "/login", { origin, "content-type": FORM }, form({ key: "x".repeat(40_000) }));
    expect(big.status).toBe(413);
    expect(big.headers["set-cookie"]).toBeUndefined();
    const json = await http("POST", "/login", { origin, "content-type": "application/json" }, JSON.stringify({ key: TEST_KEY }));
    expect(json.status).toBe(415);
  });

  it("sets an HttpOnly, SameSite=Strict session cookie that opens the console and /rpc, until logout", async () => {
    const ok = await login();
    expect(ok.status).toBe(303);
    const set = ([] as string[]).concat(ok.headers["set-cookie"] ?? []).join("\n");
    expect(set).toMatch(/HttpOnly/);
    expect(set).toMatch(/SameSite=Strict/);
    expect(set).toMatch(/Path=\//);
    const cookie = sessionCookie(ok);
    const page = await http("GET", "/", { cookie });
    expect(page.status).toBe(200);
    expect(page.body).toContain('<div id="app">');
    expect(page.headers["content-security-policy"]).toContain("script-src 'self'");
    const script = /src="(\/assets\/[^"]+\.js)"/.exec(page.body)![1]!;
    expect((await http("GET", script, { cookie })).headers["content-type"]).toMatch(/javascript/);

    // The socket: the cookie with the page's own origin; never without an Origin or from another one.
    expect(await upgrade({ cookie, origin })).toBe("open");
    expect(await upgrade({ cookie })).toBe(403);
    expect(await upgrade({ cookie, origin: "http://evil.example" })).toBe(403);
    expect(await upgrade({ origin })).toBe(401);
    expect(await upgrade({ authorization: `Bearer ${TEST_KEY}` })).toBe("open");

    // Logout needs the page's origin too (no cross-site logout), then the cookie is dead.
    expect((await http("POST", "/logout", { cookie })).status).toBe(403);
    const out = await http("POST", "/logout", { cookie, origin });
    expect(out.status).toBe(303);
    expect(String(out.headers["set-cookie"])).toMatch(/Max-Age=0/);
    expect((await http("GET", "/", { cookie })).headers.location).toBe("/login");
    expect(await upgrade({ cookie, origin })).toBe(401);
  });

  it("refuses forged and expired cookies (and clears them)", async () => {
    const forged = `${cookieName}=${"A".repeat(43)}`;
    const page = await http("GET", "/", { cookie: forged });
    expect(page.status).toBe(303);
    expect(String(page.headers["set-cookie"])).toMatch(/Max-Age=0/);
    expect(await upgrade({ cookie: forged, origin })).toBe(401);
    // Another gateway's cookie on the same host (ports share cookies) does not open this one.
    expect((await http("GET", "/", { cookie: `hermes_console_gw-other=${"B".repeat(43)}` })).status).toBe(303);

    const cookie = sessionCookie(await login());
    expect((await http("GET", "/", { cookie })).status).toBe(200);
    now += 12 * 60 * 60 * 1000 + 1;
    expect((await http("GET", "/", { cookie })).headers.location).toBe("/login");
    expect(await upgrade({ cookie, origin })).toBe(401);
  });
});

describe("one-time login links and the ops methods over gRPC", () => {
  const ops = (via: "tcp" | "control", method: string, params: unknown = {}) => {
    const client = gw.client(OpsServiceClient, via);
    return call(client, client.call, { method, params_json: JSON.stringify(params) }).then((a) => JSON.parse(a.result_json));
  };

  it("issues a login link only on the control socket; it logs in once", async () => {
    await expect(ops("tcp", "console.login_link")).rejects.toMatchObject({ reason: "refused" });
    const link = (await ops("control", "console.login_link")) as { url: string; expires_at: string };
    expect(link.url.startsWith(`${origin}/login?token=`)).toBe(true);
    const token = new URL(link.url).searchParams.get("token")!;
    const page = await http("GET", `/login?token=${token}`);
    expect(page.body).toContain(`name="token" value="${token}"`);
    expect((await login({ token })).status).toBe(303);
    const again = await login({ token });
    expect(again.status).toBe(401);
    expect(again.body).toContain("used already or has expired");
  });

  it("answers mesh.status and mesh.check, and refuses unknown methods and bad params", async () => {
    const status = (await ops("tcp", "mesh.status")) as { self: string; gateways: { gateway_id: string }[] };
    expect(status.self).toBe("gw-console");
    expect(status.gateways.map((g) => g.gateway_id)).toEqual(["gw-console"]);
    const report = (await ops("tcp", "mesh.check", { thresholds: { disk_warning_percent: 0, disk_critical_percent: 0 } })) as {
      state: string;
      checks: { name: string }[];
    };
    expect(report.checks.map((c) => c.name)).toEqual(["fsync", "disk", "replica_lag", "rooms", "relay", "deliveries"]);
    await expect(ops("tcp", "bots.chat", {})).rejects.toMatchObject({ reason: "method_not_found" });
    await expect(ops("tcp", "mesh.check", { thresholds: { fsync_warning_ms: "slow" } })).rejects.toMatchObject({
      reason: "invalid_params",
      data: { field: "thresholds.fsync_warning_ms" },
    });
    const client = new OpsServiceClient(gw.gateway.grpcAddress, credentials.createInsecure());
    await expect(call(client, client.call, { method: "mesh.status", params_json: "{" })).rejects.toMatchObject({
      reason: "invalid_params",
    });
    await expect(call(client, client.call, { method: "mesh.status", params_json: "" }, null)).rejects.toMatchObject({
      reason: "unauthenticated",
    });
    client.close();
  });
});
