// Self-test of the etcd helpers (harness/etcd.ts): a 3-member cluster of the offline etcd image on a
// test network, reachable by alias from other containers; a member killed and restarted rejoins with
// its data; a majority paused takes the quorum away and gives it back on resume. (Partitions of etcd
// and a majority killed -9 are exercised by scenarios/quorum.test.ts.)
import { beforeAll, describe, expect, it } from "vitest";
import { type EtcdCluster, eventually, type MeshNetwork, type MeshNode, useMesh } from "./harness/index.js";

describe("harness: etcd cluster in containers", () => {
  const mesh = useMesh("etcd-harness");
  let lan: MeshNetwork;
  let etcd: EtcdCluster;
  let probe: MeshNode;

  beforeAll(async () => {
    lan = await mesh.network("lan");
    [etcd, probe] = await Promise.all([mesh.etcdCluster({ networks: [lan] }), mesh.plain("probe", [lan])]);
  });

  it("serves every member by alias inside the network and from the test process", async () => {
    expect(etcd.coordinatorUrl).toBe("etcd://etcd-0:2379,etcd-1:2379,etcd-2:2379");
    for (const url of etcd.endpoints) expect(await probe.httpGet(`${url}/version`)).toMatchObject({ status: 200 });
    await etcd.put("/it/k", "v1");
    expect(await etcd.get("/it/k")).toBe("v1");
    expect(await etcd.get("/it/absent")).toBeNull();
  });

  it("a member killed -9 leaves a quorum; restarted, it rejoins with its data", async () => {
    const [m0, m1, m2] = etcd.members;
    if (!m0 || !m1 || !m2) throw new Error("expected three members");
    await m0.crash();
    await etcd.put("/it/k", "v2"); // two of three still accept writes
    expect(await m1.healthy()).toBe(true);
    expect(await m2.healthy()).toBe(true);
    await m0.restart();
    await etcd.waitHealthy();
    expect(await probe.httpGet("http://etcd-0:2379/version")).toMatchObject({ status: 200 });
    expect(await etcd.get("/it/k")).toBe("v2");
  });

  it("pausing a majority (SIGSTOP) takes the quorum away; SIGCONT gives it back", async () => {
    const majority = etcd.majority();
    for (const m of majority) await m.pause();
    const alone = etcd.members.find((m) => !m.paused);
    if (!alone) throw new Error("no unpaused member");
    await eventually(async () => !(await alone.healthy()), { what: "the unpaused member to lose its leader", timeoutMs: 15_000 });
    expect(await etcd.hasQuorum()).toBe(false);
    for (const m of majority) await m.resume();
    await etcd.waitHealthy();
    expect(await etcd.get("/it/k")).toBe("v2");
  });
});
