import { HermesError } from "@hermes/common";
import type { Foundation } from "./foundation.js";
import type { Services } from "./services.js";
import { VERSION } from "./version.js";

/**
 * With a coordinator: registers this gateway in the mesh (`<prefix>/gateways/<id>`, its advertise
 * URL under its lease), then starts the coordinated rooms (watches, leading, claiming, following).
 * Runs once the gRPC port is bound, so the advertised address is the one that answers.
 */
export async function joinMesh(f: Foundation, s: Services, grpcAddress: string): Promise<void> {
  const settings = f.settings.coordinator;
  if (!f.coordinator || !settings || !s.coordination) return;
  const advertise = settings.advertiseUrl ?? advertiseFromListen(grpcAddress);
  await f.coordinator.register({ advertise_url: advertise, version: VERSION });
  await s.coordination.start();
  f.logger.info({ advertise_url: advertise }, "joined the coordinated mesh");
}

/** `grpc://<listen address>`, unless it is a wildcard that no other gateway can dial. */
function advertiseFromListen(address: string): string {
  const host = address.startsWith("[") ? address.slice(1, address.indexOf("]")) : address.slice(0, address.lastIndexOf(":"));
  if (host === "0.0.0.0" || host === "::" || host === "") {
    throw new HermesError(
      "invalid_config",
      `this gateway listens on ${address}, which the other gateways of the mesh cannot dial; set advertise_url in config.yaml (or HERMES_ADVERTISE_URL, or --advertise grpc://host:port)`,
    );
  }
  return `grpc://${address}`;
}
