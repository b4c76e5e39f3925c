/**
 * Node flags a daemon (gateway, relay) runs with wherever this project starts one: `hermes up`'s
 * children, the images' entrypoint (infra/image/hermes.sh) and the benchmarks. A larger young
 * generation than V8's default (16 MiB semi-spaces): a gateway under load allocates mostly
 * short-lived objects (request messages, events, promises), and with the default about a quarter of
 * its CPU went to scavenges (docs/OPERATIONS.md, "Node flags", has the figures). It costs at most
 * 2 × (32 − 16) MiB more RSS.
 */
export const DAEMON_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=32"];
