import type { Session } from "./api.js";
import { type Child, h } from "./dom.js";
import type { Rpc } from "./rpc.js";
import { RpcError } from "./rpc.js";

/** What every view gets. */
export interface Ctx {
  rpc: Rpc;
  session: Session;
  /** The route's parts after the view's name (`#/rooms/lobby` → ["lobby"]). */
  args: string[];
}

/** A view draws into `root` and returns what stops it (timers, subscriptions). */
export type View = (root: HTMLElement, ctx: Ctx) => () => void;

export function badge(text: string, kind = ""): HTMLElement {
  return h("span", { class: `badge ${kind}`.trim() }, text);
}

export function errorText(err: unknown): string {
  if (err instanceof RpcError) return `${err.message} [${err.reason}]`;
  return err instanceof Error ? err.message : String(err);
}

export function errorBox(err: unknown): HTMLElement {
  return h("p", { class: "error", role: "alert" }, errorText(err));
}

export function section(title: string, ...children: Child[]): HTMLElement {
  return h("section", { class: "card" }, h("h2", null, title), ...children);
}

export function time(iso: string | null | undefined): string {
  if (!iso) return "-";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

/** Runs `fn` now and every `ms` until stopped; a failure shows in `status` and does not stop it. */
export function every(ms: number, fn: () => Promise<void>, onError: (err: unknown) => void): () => void {
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const tick = async () => {
    try {
      await fn();
    } catch (err) {
      if (!stopped) onError(err);
    }
    if (!stopped) timer = setTimeout(() => void tick(), ms);
  };
  void tick();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}

export function newEventId(): string {
  // Time first, then randomness: ids that grow with time keep the room's id index appending at its
  // end (random ids cost several times more per event in a large room), and stay unique.
  return `console-${Date.now().toString(36)}-${crypto.randomUUID()}`;
}
