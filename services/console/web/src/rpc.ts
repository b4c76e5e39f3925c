/**
 * JSON-RPC 2.0 over the gateway's /rpc WebSocket. The browser sends the console's session cookie
 * and the page's Origin with the upgrade, which is what the gateway admits it by. Reconnects with
 * back-off; when the session is gone (the upgrade is refused and the page itself redirects to the
 * login form) it goes to the login form.
 */

export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data: { reason?: string; [key: string]: unknown },
  ) {
    super(message);
  }

  get reason(): string {
    return this.data.reason ?? "unknown";
  }
}

type Listener = (params: Record<string, unknown>) => void;
export type ConnectionState = "connecting" | "open" | "closed";

interface Waiting {
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

export class Rpc {
  private ws: WebSocket | undefined;
  private nextId = 1;
  private readonly waiting = new Map<number, Waiting>();
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly stateListeners = new Set<(s: ConnectionState) => void>();
  private opened: Promise<void> | undefined;
  private retryMs = 500;
  state: ConnectionState = "closed";

  private setState(s: ConnectionState): void {
    this.state = s;
    for (const l of this.stateListeners) l(s);
  }

  onState(listener: (s: ConnectionState) => void): () => void {
    this.stateListeners.add(listener);
    return () => this.stateListeners.delete(listener);
  }

  /** Listens to a notification (`groups.events`, …); returns the unsubscribe. */
  on(method: string, listener: Listener): () => void {
    let set = this.listeners.get(method);
    if (!set) {
      set = new Set();
      this.listeners.set(method, set);
    }
    set.add(listener);
    return () => set.delete(listener);
  }

  private connect(): Promise<void> {
    this.opened ??= new Promise<void>((resolve, reject) => {
      this.setState("connecting");
      const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/rpc`);
      this.ws = ws;
      let open = false;
      ws.addEventListener("open", () => {
        open = true;
        this.retryMs = 500;
        this.setState("open");
        resolve();
      });
      ws.addEventListener("message", (e) => this.receive(String(e.data)));
      ws.addEventListener("close", () => {
        this.opened = undefined;
        this.ws = undefined;
        this.setState("closed");
        for (const w of this.waiting.values())
          w.reject(new RpcError(-32000, "the connection to the gateway closed", { reason: "unavailable" }));
        this.waiting.clear();
        if (!open) {
          reject(new RpcError(-32000, "cannot connect to the gateway", { reason: "unavailable" }));
          void this.checkSession();
        }
        setTimeout(() => void this.connect().catch(() => undefined), this.retryMs);
        this.retryMs = Math.min(this.retryMs * 2, 10_000);
      });
    });
    return this.opened;
  }

  /** A refused upgrade tells nothing; the page does: a redirect means the session is gone. */
  private async checkSession(): Promise<void> {
    try {
      const res = await fetch("/", { redirect: "manual", credentials: "same-origin" });
      if (res.type === "opaqueredirect" || res.status === 401) location.assign("/login");
    } catch {
      // the gateway is down; keep retrying
    }
  }

  private receive(text: string): void {
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    for (const m of Array.isArray(msg) ? msg : [msg]) {
      const r = m as {
        id?: number;
        method?: string;
        params?: Record<string, unknown>;
        result?: unknown;
        error?: { code: number; message: string; data: Record<string, unknown> };
      };
      if (typeof r.method === "string") {
        for (const l of this.listeners.get(r.method) ?? []) l(r.params ?? {});
        continue;
      }
      const w = typeof r.id === "number" ? this.waiting.get(r.id) : undefined;
      if (!w) continue;
      this.waiting.delete(r.id!);
      if (r.error) w.reject(new RpcError(r.error.code, r.error.message, r.error.data ?? {}));
      else w.resolve(r.result);
    }
  }

  async call<T>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    await this.connect();
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: (v) => resolve(v as T), reject });
      this.ws!.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    });
  }
}
