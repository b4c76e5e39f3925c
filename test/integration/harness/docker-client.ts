// The dockerode client testcontainers already configured (socket, API version), for the few
// operations testcontainers has no API for: networks with options, volumes, connect/disconnect,
// SIGKILL.
import type Dockerode from "dockerode";
import { getContainerRuntimeClient } from "testcontainers";

let client: Promise<Dockerode> | undefined;

export function dockerode(): Promise<Dockerode> {
  client ??= getContainerRuntimeClient().then((c) => c.container.dockerode);
  return client;
}

/** True for Docker's "no such container/network/volume" errors (already gone is fine in cleanup). */
export function isNotFound(err: unknown): boolean {
  return typeof err === "object" && err !== null && "statusCode" in err && (err as { statusCode: number }).statusCode === 404;
}
