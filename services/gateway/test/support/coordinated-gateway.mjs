// A gateway process whose Telegram poller is coordinated by @hermes/coordinator (etcd), on the
// BUILT packages, so a test can kill -9 the gateway that polls and watch another take over.
// argv: home gatewayId endpoints(comma-separated) prefix ttlSeconds
// stdout: the gateway's ready line (`gateway ready: id=… grpc=… http=… control=…`), like `hermes gateway start`.
import { Coordinator } from "@hermes/coordinator";
import { coordinatorSingletons, Gateway } from "../../dist/index.js";

const [home, id, endpoints, prefix, ttl] = process.argv.slice(2);
process.umask(0o077);
const coordinator = await Coordinator.connect({ endpoints: endpoints.split(","), prefix, gatewayId: id, leaseTtlSeconds: Number(ttl) });
const gateway = await Gateway.start({
  home,
  overrides: { id, grpc: "127.0.0.1:0", http: "127.0.0.1:0" },
  singletons: coordinatorSingletons(coordinator),
});
process.stdout.write(
  `gateway ready: id=${gateway.id} grpc=${gateway.grpcAddress} http=${gateway.httpAddress} control=${gateway.home.controlSocket}\n`,
);
process.once("SIGTERM", async () => {
  await gateway.stop();
  await coordinator.close();
  process.exit(0);
});
