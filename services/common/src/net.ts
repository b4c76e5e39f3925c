import { HermesError } from "./errors.js";

export interface HostPort {
  host: string;
  port: number;
}

/** Parses `host:port` (IPv6 as `[::1]:7440`). Port 0 asks the OS for a free port. */
export function parseHostPort(value: string, what = "address"): HostPort {
  const match = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(value.trim());
  const port = match ? Number(match[2]) : Number.NaN;
  if (!match || port > 65535) {
    throw new HermesError("invalid_params", `invalid ${what} ${JSON.stringify(value)}: expected HOST:PORT such as 127.0.0.1:7440`);
  }
  return { host: match[1]!.replace(/^\[|\]$/g, ""), port };
}

export function formatHostPort({ host, port }: HostPort): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * A gateway/relay gRPC URL: `grpc://host:port` (plaintext) or `grpcs://host:port` (TLS).
 * Returns the grpc-js target and whether TLS is wanted.
 */
export function parseGrpcUrl(url: string): { target: string; tls: boolean } {
  const match = /^(grpcs?):\/\/([^/]+?)\/?$/.exec(url.trim());
  if (!match) {
    throw new HermesError("invalid_params", `invalid gRPC URL ${JSON.stringify(url)}: expected grpc://HOST:PORT or grpcs://HOST:PORT`);
  }
  const hp = parseHostPort(match[2]!, "gRPC URL");
  return { target: formatHostPort(hp), tls: match[1] === "grpcs" };
}
