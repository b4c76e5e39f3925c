import type { HermesError } from "@hermes/common";
import { ModelConfigSource } from "../../src/agents/app/model-config.js";
import { HermesHome } from "../../src/home/store/home.js";
import { PeerClient, type PeerMessage } from "../../src/peers/app/peer-client.js";
import { peerDirectory } from "../../src/peers/app/peer-directory.js";
import type { TestGateway } from "./gateway-harness.js";

/**
 * The calling side of a peer call exactly as `hermes peer` builds it: the peer directory of a home
 * (config.yaml bot_peers + HERMES_HOME/.env), then PeerService over real gRPC with the peer's key.
 * A fresh directory per call, so edits to the files are always seen.
 */
export function peerClient(home: string, peer: string): PeerClient {
  return PeerClient.open(peerDirectory(new ModelConfigSource(new HermesHome(home))), peer);
}

/** Runs `fn` with a client of `peer` from `home`, closing it afterwards. */
export async function withPeer<T>(home: string, peer: string, fn: (client: PeerClient) => Promise<T>): Promise<T> {
  const client = peerClient(home, peer);
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}

export function message(
  input: string,
  profile = "",
  extra: Partial<PeerMessage> = {},
  sender = { profile: "alice", gateway: "gw-a", name: "Alice" },
): PeerMessage {
  return { profile, input, sender, ...extra };
}

export async function failure(p: Promise<unknown> | (() => unknown)): Promise<HermesError> {
  try {
    await (typeof p === "function" ? p() : p);
  } catch (err) {
    return err as HermesError;
  }
  throw new Error("expected a failure");
}

/** Rows of B's peer_runs table (a separate read of the same database). */
export function runCount(t: TestGateway): number {
  return (t.gateway.db.prepare("SELECT count(*) AS n FROM peer_runs").get() as { n: number }).n;
}
