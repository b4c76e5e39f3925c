import { lookup as dnsLookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";
import { HermesError } from "./pure/errors.js";

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

/** Every address a host name stands for, in the resolver's order (an IP literal stands for itself). */
export type HostResolver = (host: string) => Promise<string[]>;

export const systemResolver: HostResolver = async (host) => (await dnsLookup(host, { all: true, verbatim: true })).map((a) => a.address);

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet("127.0.0.0", 8, "ipv4");
LOOPBACK.addAddress("::1", "ipv6");

/** True for a loopback IP address (127.0.0.0/8, ::1, IPv4-mapped 127.x). A name is never loopback by itself. */
export function isLoopbackAddress(address: string): boolean {
  const ip = address.replace(/^\[|\]$/g, "");
  const family = isIP(ip);
  return family !== 0 && LOOPBACK.check(ip, family === 4 ? "ipv4" : "ipv6");
}

/** A listen address after resolution: what to bind (one checked address) and everything the name stood for. */
export interface ResolvedListen {
  /** As configured, e.g. `localhost:7440`. */
  requested: string;
  /** The address to bind: the first one the name resolved to, the one that was checked. */
  bind: HostPort;
  addresses: string[];
  /** Every address is loopback. */
  loopback: boolean;
}

/**
 * Resolves `host:port` once, before binding: the caller binds `bind` (an IP address), so the check
 * made on the addresses cannot be undone by a second resolution that answers differently.
 */
export async function resolveListenAddress(value: string, what: string, resolver: HostResolver = systemResolver): Promise<ResolvedListen> {
  let hp: HostPort;
  try {
    hp = parseHostPort(value, what);
  } catch (err) {
    throw new HermesError("invalid_config", `${what}: ${(err as Error).message}`);
  }
  let addresses: string[];
  try {
    addresses = isIP(hp.host) ? [hp.host] : await resolver(hp.host);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw new HermesError(
      "invalid_config",
      `${what} ${value}: cannot resolve ${hp.host}${typeof code === "string" ? ` (${code})` : ""}; give an IP address such as 127.0.0.1`,
      { cause: err },
    );
  }
  if (addresses.length === 0) throw new HermesError("invalid_config", `${what} ${value}: ${hp.host} resolves to no address`);
  return { requested: value, bind: { host: addresses[0]!, port: hp.port }, addresses, loopback: addresses.every(isLoopbackAddress) };
}

/** How a listen address is described in messages: `name:port (resolves to a, b)` when a name was given. */
export function describeListen(r: ResolvedListen): string {
  const host = parseHostPort(r.requested).host;
  return isIP(host) ? r.requested : `${r.requested} (resolves to ${r.addresses.join(", ")})`;
}

/** A failed socket call in grpc-js's words (`connect ECONNREFUSED 127.0.0.1:1`), in plain words. */
function plainSocketError(cause: string): string {
  const m = /^(?:connect|read|write) (E[A-Z]+)(?: (.+))?$/.exec(cause);
  if (!m) return cause;
  const [, code, where] = m;
  const plain: Record<string, string> = {
    ECONNREFUSED: "connection refused",
    ECONNRESET: "the connection was reset",
    ETIMEDOUT: "the connection timed out",
    EHOSTUNREACH: "host unreachable",
    ENETUNREACH: "network unreachable",
    ENOENT: `no socket at ${where}`,
    EACCES: `permission denied${where ? ` on ${where}` : ""}`,
  };
  return plain[code!] ?? cause;
}

/** Each pattern with what replaces it (given the match, then its groups, as String.replace passes them). */
const GRPC_WORDING: [RegExp, (...match: string[]) => string][] = [
  // The load balancer's summary (round_robin's starts with its name), with its (usually empty) resolution note.
  [
    /(?:(?:weighted_)?round_robin: )?No connection established\. Last error: (?:Error: )?(.+?)\. Resolution note: [^;)\n]*/g,
    (_, cause) => plainSocketError(cause!),
  ],
  [/Name resolution failed for target (?:dns:)?(\[[^\]]+\]|[^\s:;)]+)(?::\d+)?/g, (_, host) => `cannot resolve ${host}`],
  // Deadline details list load-balancer timings.
  [/Deadline exceeded after ([\d.]+)s(?:,[^;)\n]*)?/g, (_, secs) => `no answer within ${Number(secs)} s`],
  [/Failed to connect before the deadline/g, () => "no connection before the deadline"],
];

/**
 * Text with grpc-js's transport wording (`No connection established. Last error: … Resolution
 * note:`, name-resolution targets, load-balancer timings) reduced to what failed, e.g.
 * "connection refused" or "cannot resolve host.example". Other text passes unchanged.
 */
export function plainTransportText(text: string): string {
  return GRPC_WORDING.reduce((out, [pattern, plain]) => out.replace(pattern, (...match: string[]) => plain(...match)), text);
}
