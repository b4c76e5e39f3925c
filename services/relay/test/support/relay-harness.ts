import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "@hermes/common";
import { Relay } from "../../src/daemon/relay.js";
import type { RelayOverrides } from "../../src/home/app/config.js";

export interface TestRelay {
  relay: Relay;
  dataDir: string;
  /** `grpc://127.0.0.1:PORT` */
  url: string;
  /** Stops and starts again on the same data folder and the same port. */
  restart(): Promise<void>;
  destroy(): Promise<void>;
}

/** A real relay on 127.0.0.1 with its own temporary data folder (ports chosen by the OS unless given). */
export async function startTestRelay(
  options: { dataDir?: string; overrides?: RelayOverrides; settings?: RelayOverrides["settings"] } = {},
): Promise<TestRelay> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "hrelay-"));
  const start = (grpc: string) =>
    Relay.start({
      dataDir,
      overrides: { grpc, http: "127.0.0.1:0", ...options.overrides, settings: { sweepMs: 100, ...options.settings } },
      logger: createLogger("relay", "silent"),
      env: {},
    });
  let relay = await start(options.overrides?.grpc ?? "127.0.0.1:0");
  const handle: TestRelay = {
    get relay() {
      return relay;
    },
    dataDir,
    url: `grpc://${relay.grpcAddress}`,
    async restart() {
      const address = relay.grpcAddress;
      await relay.stop();
      relay = await start(address);
    },
    async destroy() {
      await relay.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return handle;
}
