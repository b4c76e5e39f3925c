import { Backoff, sleep } from "@hermes/common/client";
import type { Etcd3, IKeyValue, Watcher } from "etcd3";

export interface WatchHandlers {
  onPut(kv: IKeyValue): void;
  onDelete(kv: IKeyValue): void;
  /**
   * The watch (re)started and may have missed events: re-read what it covers. Called once the watch
   * is first created and again after the watch had to be created anew.
   */
  onResync(): void;
}

export interface WatchHandle {
  cancel(): Promise<void>;
}

/**
 * A watch on one key or one prefix that never gives up. The library resumes a broken stream from the
 * last revision it saw; when the watcher itself fails (the revision was compacted, etcd refused it),
 * it is created anew after a back-off and the caller re-reads (`onResync`).
 */
export async function watchForever(
  client: Etcd3,
  target: { key: string } | { prefix: string },
  handlers: WatchHandlers,
): Promise<WatchHandle> {
  let watcher: Watcher | null = null;
  let cancelled = false;
  const backoff = new Backoff({ initialMs: 100, maxMs: 2000 });

  const create = async (): Promise<Watcher> => {
    const builder = "key" in target ? client.watch().key(target.key) : client.watch().prefix(target.prefix);
    const created = await builder.create();
    created.on("put", (kv) => handlers.onPut(kv));
    created.on("delete", (kv) => handlers.onDelete(kv));
    created.on("connected", () => backoff.reset());
    created.on("error", () => void recreate(created));
    return created;
  };

  const recreate = async (failed: Watcher): Promise<void> => {
    if (cancelled || watcher !== failed) return;
    watcher = null;
    await failed.cancel().catch(() => undefined);
    while (!cancelled) {
      await sleep(backoff.nextDelayMs());
      try {
        const fresh = await create();
        if (cancelled) {
          await fresh.cancel().catch(() => undefined);
          return;
        }
        watcher = fresh;
        handlers.onResync();
        return;
      } catch {
        // etcd still unreachable: try again later
      }
    }
  };

  watcher = await create();
  handlers.onResync();
  return {
    async cancel() {
      cancelled = true;
      await watcher?.cancel().catch(() => undefined);
      watcher = null;
    },
  };
}
