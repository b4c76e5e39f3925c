import WebSocket from "ws";
import { eventually } from "../../../../test/support/eventually.js";
import { TEST_KEY } from "./gateway-harness.js";

export interface RpcError {
  code: number;
  message: string;
  data: { reason: string; [key: string]: unknown };
}

/** A small JSON-RPC 2.0 client over ws for tests: calls by id, notifications collected by method. */
export class RpcClient {
  private nextId = 1;
  private readonly waiting = new Map<number | string, (msg: Record<string, unknown>) => void>();
  readonly notifications: { method: string; params: Record<string, unknown> }[] = [];
  readonly raw: unknown[] = [];

  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data) => {
      const msg = JSON.parse(data.toString()) as Record<string, unknown> | Record<string, unknown>[];
      this.raw.push(msg);
      for (const m of Array.isArray(msg) ? msg : [msg]) {
        if (typeof m.method === "string") {
          this.notifications.push({ method: m.method, params: m.params as Record<string, unknown> });
          continue;
        }
        const waiter = this.waiting.get(m.id as number);
        if (waiter) {
          this.waiting.delete(m.id as number);
          waiter(m);
        }
      }
    });
  }

  static connect(httpAddress: string, key: string | null = TEST_KEY): Promise<RpcClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(`ws://${httpAddress}/rpc`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
      ws.once("open", () => resolve(new RpcClient(ws)));
      ws.once("unexpected-response", (_req, res) => reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { status: res.statusCode })));
      ws.once("error", reject);
    });
  }

  /** Resolves with `result`, rejects with the JSON-RPC error object. */
  call<T = Record<string, unknown>>(method: string, params?: unknown): Promise<T> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, (m) => (m.error ? reject(m.error as RpcError) : resolve(m.result as T)));
      this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) }));
    });
  }

  async error(method: string, params?: unknown): Promise<RpcError> {
    try {
      await this.call(method, params);
    } catch (err) {
      return err as RpcError;
    }
    throw new Error(`${method} succeeded; expected an error`);
  }

  /** Sends a raw frame and resolves with the next answer that is not a notification. */
  sendRaw(frame: string | Buffer): Promise<unknown> {
    const before = this.raw.length;
    this.ws.send(frame);
    return eventually(
      () => this.raw.slice(before).find((m) => Array.isArray(m) || typeof (m as { method?: unknown }).method !== "string") ?? false,
      { timeoutMs: 5000, intervalMs: 5, what: "an answer to the raw frame" },
    );
  }

  close(): void {
    this.ws.close();
  }
}
