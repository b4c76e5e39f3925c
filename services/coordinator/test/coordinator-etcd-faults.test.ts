import { HermesError } from "@hermes/common/client";
import { Etcd3 } from "etcd3";
import { afterEach, describe, expect, it } from "vitest";
import { type EtcdCluster, startEtcdCluster } from "../../../test/support/etcd.js";
import { eventually } from "../../../test/support/eventually.js";
import { Coordinator, initialRecord } from "../src/index.js";

/** etcd lost while gateways run: a single node killed and restarted, and a 3-member cluster losing one member, then its majority. */

const TTL = 2;
const registration = { advertise_url: "grpc://127.0.0.1:7440", version: "0.1.0" };
let cluster: EtcdCluster | null = null;
const opened: Coordinator[] = [];

afterEach(async () => {
  await Promise.all(opened.splice(0).map((c) => c.close()));
  await cluster?.stop();
  cluster = null;
});

async function connect(endpoints: string[], gatewayId: string): Promise<Coordinator> {
  const coordinator = await Coordinator.connect({ endpoints, prefix: "/hermes", gatewayId, leaseTtlSeconds: TTL });
  opened.push(coordinator);
  return coordinator;
}

function phases(coordinator: Coordinator): string[] {
  const seen: string[] = [];
  coordinator.onLeaseChange((c) => seen.push(c.phase));
  return seen;
}

describe("etcd lost mid-run", () => {
  it("typed refusals while it is down, self-fencing past the deadline, recovery when it is back", async () => {
    cluster = await startEtcdCluster(1);
    const [etcd] = cluster.members;
    const a = await connect(cluster.endpoints, "gw-a");
    await a.register(registration);
    const seen = phases(a);
    const arrivals: string[] = [];
    await a.watchGateways((id, reg) => reg && arrivals.push(id));

    await etcd!.kill9();
    await expect(a.readAuthority("r1")).rejects.toMatchObject({ reason: "coordinator_unavailable" });
    await expect(a.gateways()).rejects.toBeInstanceOf(HermesError);
    await eventually(() => seen.includes("lost"), { what: "the lease to be lost by gw-a's own clock" });
    // What needs the lease says what to fix: etcd.
    expect(() => a.requireLease()).toThrow(expect.objectContaining({ reason: "coordinator_unavailable" }));
    expect(await a.claimAuthority("r1", { mode: "automatic", localMaxEpoch: 0 })).toMatchObject({ kind: "refuse", code: "lease_lost" });
    expect(await a.writeAuthority("r1", "0", initialRecord("gw-a", a.leaseStatus().leaseId!, 1))).toEqual({ kind: "lease_lost" });

    await etcd!.restart();
    await eventually(() => a.leaseStatus().phase === "valid", { what: "a valid lease once etcd is back" });
    await eventually(async () => (await a.gateways()).has("gw-a"), { what: "gw-a registered again" });
    const written = await a.writeAuthority("r1", "0", initialRecord("gw-a", a.requireLease(), 1));
    expect(written.kind).toBe("written");
    // The watch started before the outage still delivers.
    const b = await connect(cluster.endpoints, "gw-b");
    await b.register(registration);
    await eventually(() => arrivals.includes("gw-b"), { what: "the old watch to report gw-b" });
  });
});

describe("a 3-member etcd cluster", () => {
  it("keeps serving with one member killed, refuses without a majority, and recovers", async () => {
    cluster = await startEtcdCluster(3);
    const a = await connect(cluster.endpoints, "gw-a");
    await a.register(registration);
    const seen = phases(a);
    const [m0, m1, m2] = cluster.members;

    await m0!.kill9();
    const before = a.leaseStatus().validUntil!;
    await eventually(() => (a.leaseStatus().validUntil ?? 0) > before + 1000, { what: "renewals through the two members left" });
    expect(seen).not.toContain("lost");
    expect((await a.writeAuthority("r1", "0", initialRecord("gw-a", a.requireLease(), 1))).kind).toBe("written");

    await m1!.kill9();
    await eventually(() => seen.includes("lost"), { what: "the lease to be lost without a majority" });
    await expect(a.readAuthority("r1")).rejects.toMatchObject({ reason: "coordinator_unavailable" });

    await Promise.all([m0!.restart(), m1!.restart()]);
    await eventually(() => a.leaseStatus().phase === "valid", { timeoutMs: 20_000, what: "a valid lease with the majority back" });
    const raw = new Etcd3({ hosts: m2!.endpoint });
    try {
      expect(await raw.get("/hermes/gateways/gw-a").string()).not.toBeNull();
    } finally {
      raw.close();
    }
    expect((await a.readAuthority("r1")).record).toMatchObject({ gateway_id: "gw-a", epoch: 1 });
  });
});
