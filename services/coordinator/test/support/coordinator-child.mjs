// A separate node process using the BUILT package, so tests can SIGSTOP or SIGKILL a real lease holder.
// argv: endpoints(comma-separated) prefix gatewayId ttlSeconds
// stdout: one JSON object per line ({"event": ...}); stdin: one command per line:
//   singleton <name>                     compete for a singleton
//   claim <room> <mode> <localMaxEpoch>  claimAuthority
//   create <room>                        write the room's first record (epoch 1)
//   status                               print the lease status
import { createInterface } from "node:readline";
import { Coordinator, initialRecord } from "../../dist/index.js";

const [endpoints, prefix, gatewayId, ttl] = process.argv.slice(2);
const print = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);

const coordinator = await Coordinator.connect({ endpoints: endpoints.split(","), prefix, gatewayId, leaseTtlSeconds: Number(ttl) });
coordinator.onLeaseChange((change) => print({ event: "lease", ...change }));
await coordinator.register({ advertise_url: "grpc://127.0.0.1:7440", version: "0.1.0" });
print({ event: "ready", lease: coordinator.leaseStatus().leaseId });

const commands = createInterface({ input: process.stdin });
commands.on("line", async (line) => {
  const [command, ...args] = line.trim().split(/\s+/);
  try {
    if (command === "singleton") {
      coordinator.singleton(args[0], {
        onAcquired: () => print({ event: "acquired", name: args[0] }),
        onLost: () => print({ event: "lost", name: args[0] }),
      });
      print({ event: "competing", name: args[0] });
    } else if (command === "claim") {
      print({ event: "claim", outcome: await coordinator.claimAuthority(args[0], { mode: args[1], localMaxEpoch: Number(args[2]) }) });
    } else if (command === "create") {
      const lease = coordinator.requireLease();
      print({ event: "create", outcome: await coordinator.writeAuthority(args[0], "0", initialRecord(gatewayId, lease, 1)) });
    } else if (command === "status") {
      print({ event: "status", ...coordinator.leaseStatus() });
    }
  } catch (err) {
    print({ event: "error", command, reason: err.reason ?? "internal", message: err.message });
  }
});
commands.on("close", () => void coordinator.close().then(() => process.exit(0)));
