// A stand-in for the `hermes` command with the container-relevant surface of the real one
// (`gateway start`, `gateway status --json`, `relay start`, `relay key add`): same flags, same
// ready lines, /livez /readyz /metrics, a TCP listener on the gRPC port, and the gateway id
// persisted in the home directory. It lets the harness be built and tested before the real
// daemons exist, and keeps a harness self-test independent of application bugs.
// It is copied into the app image's containers at /opt/hermes-standin/hermes.mjs; no dependencies.
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { createServer as createTcpServer } from "node:net";
import { join } from "node:path";

const argv = process.argv.slice(2);

function flag(name, fallback) {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : fallback;
}

function usage(message) {
  process.stderr.write(`hermes (stand-in): ${message}\n`);
  process.exit(2);
}

function splitHostPort(value, what) {
  const at = value.lastIndexOf(":");
  const port = Number(value.slice(at + 1));
  if (at <= 0 || !Number.isInteger(port) || port < 0 || port > 65535) usage(`--${what} wants HOST:PORT, got ${value}`);
  return { host: value.slice(0, at), port };
}

const isLoopback = (host) => host === "127.0.0.1" || host === "localhost" || host === "::1";

function listen(kind, httpAddr, grpcAddr, readyFields) {
  const started = Date.now();
  let ready = false;
  const http = createServer((req, res) => {
    if (req.url === "/livez") return res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
    if (req.url === "/readyz") {
      res.writeHead(ready ? 200 : 503, { "content-type": "application/json" });
      return res.end(JSON.stringify({ ready, ...readyFields }));
    }
    if (req.url === "/whoami") {
      // Who connected, as this process sees it: proves SNAT (the router's address) in NAT tests.
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({ remote: req.socket.remoteAddress?.replace(/^::ffff:/, ""), ...readyFields }));
    }
    if (req.url === "/metrics") {
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4" });
      return res.end(`# TYPE ${kind}_uptime_seconds gauge\n${kind}_uptime_seconds ${(Date.now() - started) / 1000}\n`);
    }
    res.writeHead(404).end();
  });
  // The real daemons speak gRPC here; the stand-in only accepts connections.
  const grpc = createTcpServer((socket) => socket.end());
  let pending = 2;
  const onListening = () => {
    pending--;
    if (pending > 0) return;
    ready = true;
    const fields = Object.entries({ ...readyFields, grpc: `${grpcAddr.host}:${grpcAddr.port}`, http: `${httpAddr.host}:${httpAddr.port}` })
      .map(([k, v]) => `${k}=${v}`)
      .join(" ");
    process.stdout.write(`${kind} ready: ${fields}\n`);
  };
  http.listen(httpAddr.port, httpAddr.host, onListening);
  grpc.listen(grpcAddr.port, grpcAddr.host, onListening);
  const stop = () => {
    ready = false;
    http.close();
    grpc.close();
    process.stdout.write(`${kind} stopped\n`);
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

function requireKeyFor(addrs) {
  if (addrs.some((a) => !isLoopback(a.host)) && !process.env.API_SERVER_KEY) {
    usage("refusing a non-loopback bind without an API key; set API_SERVER_KEY");
  }
}

function gatewayIdentity(home, wantedId) {
  const file = join(home, "standin-gateway.json");
  if (existsSync(file)) {
    const { id } = JSON.parse(readFileSync(file, "utf8"));
    if (wantedId && wantedId !== id) usage(`this home belongs to gateway ${id}, not ${wantedId}`);
    return id;
  }
  const id = wantedId ?? `gw-${randomBytes(4).toString("hex")}`;
  mkdirSync(home, { recursive: true });
  writeFileSync(file, JSON.stringify({ id }));
  return id;
}

const [group, command] = argv;
const home = flag("home", process.env.HERMES_HOME ?? "/data");

if (group === "gateway" && command === "start") {
  const grpc = splitHostPort(flag("grpc", "127.0.0.1:7440"), "grpc");
  const http = splitHostPort(flag("http", "127.0.0.1:7441"), "http");
  requireKeyFor([grpc, http]);
  const id = gatewayIdentity(home, flag("id"));
  listen("gateway", http, grpc, { id });
} else if (group === "gateway" && command === "status") {
  const file = join(home, "standin-gateway.json");
  if (!existsSync(file)) usage(`no gateway in ${home}`);
  process.stdout.write(`${JSON.stringify({ id: JSON.parse(readFileSync(file, "utf8")).id, standin: true })}\n`);
} else if (group === "relay" && command === "start") {
  const grpc = splitHostPort(flag("grpc", "127.0.0.1:7450"), "grpc");
  const http = splitHostPort(flag("http", "127.0.0.1:7451"), "http");
  requireKeyFor([grpc, http]);
  mkdirSync(flag("data", "/data"), { recursive: true });
  listen("relay", http, grpc, {});
} else if (group === "relay" && command === "key" && argv[2] === "add" && argv[3]) {
  const data = flag("data", "/data");
  const file = join(data, "standin-relay-keys.json");
  const keys = existsSync(file) ? JSON.parse(readFileSync(file, "utf8")) : {};
  keys[argv[3]] = randomBytes(24).toString("base64url");
  mkdirSync(data, { recursive: true });
  writeFileSync(file, JSON.stringify(keys), { mode: 0o600 });
  process.stdout.write(`${keys[argv[3]]}\n`);
} else {
  usage(`unsupported command: ${argv.join(" ")}`);
}
