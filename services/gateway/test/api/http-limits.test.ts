import { mkdtempSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { eventually } from "../../../../test/support/eventually.js";
import { startTestGateway, TEST_KEY, type TestGateway } from "../support/gateway-harness.js";
import { RpcClient } from "../support/rpc-client.js";

/**
 * The HTTP port's limits as a client meets them: a body over 1 MiB on the api platform is a 413
 * with a JSON error, a /rpc frame over 4 MiB closes with 1009 and a reason, a browser page of
 * another origin is refused 403 before any WebSocket exists, and past http.max_rpc_connections
 * an upgrade is refused 503.
 */

const MAX_BODY = 1024 * 1024;
const MAX_FRAME = 4 * 1024 * 1024;

let t: TestGateway;

beforeAll(async () => {
  const home = mkdtempSync(join(tmpdir(), "hermes-http-limits-"));
  writeFileSync(join(home, "config.yaml"), "http:\n  allowed_origins: [https://ops.example.com]\n  max_rpc_connections: 4\n");
  t = await startTestGateway({ home });
});
afterAll(async () => {
  await t?.destroy();
});

interface RawReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** POSTs `chunks` to the api platform, declaring the length or not (chunked), and reads the whole reply. */
function postRaw(chunks: Buffer[], declareLength: boolean): Promise<RawReply> {
  const total = chunks.reduce((n, c) => n + c.length, 0);
  return new Promise((resolve, reject) => {
    const req = request(
      `http://${t.gateway.httpAddress}/v1/platforms/api/messages`,
      {
        method: "POST",
        headers: {
          authorization: `Bearer ${TEST_KEY}`,
          "content-type": "application/json",
          ...(declareLength ? { "content-length": String(total) } : {}),
        },
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        res.on("error", reject);
      },
    );
    // The gateway may answer and close before the whole body is sent: that is the point.
    req.on("error", reject);
    const write = (i: number) => {
      if (i === chunks.length) {
        req.end();
        return;
      }
      if (req.destroyed) return;
      if (req.write(chunks[i]!)) write(i + 1);
      else req.once("drain", () => write(i + 1));
    };
    write(0);
  });
}

describe("api platform body limit", () => {
  const oversized = () => Array.from({ length: 24 }, () => Buffer.alloc(64 * 1024, 0x20));

  it("answers a declared oversized body 413 with a JSON error, without reading it", async () => {
    const reply = await postRaw(oversized(), true);
    expect(reply.status).toBe(413);
    expect(reply.headers["content-type"]).toContain("application/json");
    expect(JSON.parse(reply.body)).toMatchObject({ error: { reason: "payload_too_large", data: { limit: MAX_BODY } } });
  });

  it("answers a chunked body that grows past the limit 413 as well", async () => {
    const reply = await postRaw(oversized(), false);
    expect(reply.status).toBe(413);
    expect(JSON.parse(reply.body)).toMatchObject({ error: { reason: "payload_too_large" } });
  });

  it("still reads a body under the limit (a typed 400 for a bad one)", async () => {
    const reply = await postRaw([Buffer.from(`{"profile":"default","chat_id":"1","text":"${"x".repeat(1000)}","extra":1}`)], true);
    expect(reply.status).toBe(400);
    expect(JSON.parse(reply.body)).toMatchObject({ error: { reason: "invalid_params" } });
  });
});

function connect(headers: Record<string, string>): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://${t.gateway.httpAddress}/rpc`, { headers: { authorization: `Bearer ${TEST_KEY}`, ...headers } });
    ws.once("open", () => resolve(ws));
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => reject(Object.assign(new Error(`HTTP ${res.statusCode}: ${body}`), { status: res.statusCode, body })));
    });
    ws.once("error", reject);
  });
}

async function refusal(headers: Record<string, string>): Promise<{ status: number; body: string }> {
  try {
    (await connect(headers)).close();
  } catch (err) {
    return err as { status: number; body: string };
  }
  throw new Error("the upgrade was accepted");
}

describe("/rpc frame limit", () => {
  it("closes a connection whose frame is over 4 MiB with 1009 and says why", async () => {
    const ws = await connect({});
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() })),
    );
    ws.on("error", () => {});
    ws.send(Buffer.alloc(MAX_FRAME + 1, 0x20));
    const { code, reason } = await closed;
    expect(code).toBe(1009);
    expect(reason).toContain(String(MAX_FRAME));
  });

  it("serves a frame at the limit", async () => {
    const rpc = await RpcClient.connect(t.gateway.httpAddress);
    try {
      const frame = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "groups.capabilities", params: {} });
      const answer = await rpc.sendRaw(frame.padEnd(MAX_FRAME, " "));
      expect(answer).toMatchObject({ id: 1, result: { gateway_id: t.gateway.id } });
    } finally {
      rpc.close();
    }
  });
});

describe("/rpc origin check", () => {
  it("refuses a page of another origin 403 before any WebSocket exists, so it cannot create a room", async () => {
    const r = await refusal({ origin: "http://evil.example" });
    expect(r.status).toBe(403);
    expect(r.body).toContain("http.allowed_origins");
    const withoutKey = await new Promise<number>((resolve) => {
      const ws = new WebSocket(`ws://${t.gateway.httpAddress}/rpc`, { origin: "http://evil.example" });
      ws.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
      ws.once("error", () => {});
    });
    expect(withoutKey).toBe(403);
    expect(t.gateway.rooms.count()).toBe(0);
  });

  it("lets through clients without Origin, the gateway's own origin and http.allowed_origins", async () => {
    const port = t.gateway.httpAddress.split(":").pop()!;
    for (const origin of [undefined, `http://127.0.0.1:${port}`, `http://localhost:${port}`, "https://ops.example.com"]) {
      const ws = await connect(origin ? { origin } : {});
      ws.close();
    }
    for (const origin of [`http://127.0.0.1:${Number(port) + 1}`, `https://127.0.0.1:${port}`, "https://ops.example.com.evil", "null"]) {
      expect((await refusal({ origin })).status).toBe(403);
    }
  });
});

describe("/rpc connection cap", () => {
  it("refuses upgrades past http.max_rpc_connections with 503 and serves again once one closes", async () => {
    const open: WebSocket[] = [];
    for (let i = 0; i < 4; i++) open.push(await connect({}));
    const r = await refusal({});
    expect(r.status).toBe(503);
    expect(r.body).toContain("http.max_rpc_connections");
    const first = open.shift()!;
    await new Promise<void>((resolve) => {
      first.once("close", () => resolve());
      first.close();
    });
    // The gateway sees the close a moment later; until then the slot is still taken.
    await eventually(
      async () => {
        try {
          open.push(await connect({}));
          return true;
        } catch (err) {
          if ((err as { status?: number }).status === 503) return false;
          throw err;
        }
      },
      { timeoutMs: 5000, what: "the freed connection slot" },
    );
    for (const ws of open) ws.close();
  });
});
