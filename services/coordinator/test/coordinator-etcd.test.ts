import { HermesError } from "@hermes/common/client";
import { Etcd3 } from "etcd3";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { deadEndpoint, type EtcdMember, startEtcd } from "../../../test/support/etcd.js";
import { eventually } from "../../../test/support/eventually.js";
import { assessAuthorityRecord, Coordinator, type CoordinatorOptions, encodeAuthorityRecord, initialRecord } from "../src/index.js";
import { type CoordinatorChild, startCoordinatorChild } from "./support/child.js";

/**
 * The etcd adapter against a real etcd (Debian etcd-server) on random loopback ports. Lease TTL 2 s.
 * Lease holders that must be paused or killed for real run in child processes (coordinator-child.mjs).
 */

const TTL = 2;
let etcd: EtcdMember & { stopAll(): Promise<void> };
let raw: Etcd3;
let prefixCounter = 0;
const opened: Coordinator[] = [];
const children: CoordinatorChild[] = [];

beforeAll(async () => {
  etcd = await startEtcd();
  raw = new Etcd3({ hosts: etcd.endpoint });
});

afterAll(async () => {
  raw?.close();
  await etcd?.stopAll();
});

afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(children.splice(0).map((c) => c.stop()));
  await Promise.all(opened.splice(0).map((c) => c.close()));
});

/** A fresh prefix per test, so tests share one etcd without seeing each other. */
function freshPrefix(): string {
  prefixCounter += 1;
  return `/test-${process.pid}-${prefixCounter}`;
}

async function connect(prefix: string, gatewayId: string, extra: Partial<CoordinatorOptions> = {}): Promise<Coordinator> {
  const coordinator = await Coordinator.connect({ endpoints: [etcd.endpoint], prefix, gatewayId, leaseTtlSeconds: TTL, ...extra });
  opened.push(coordinator);
  return coordinator;
}

async function child(prefix: string, gatewayId: string): Promise<CoordinatorChild> {
  const started = await startCoordinatorChild([etcd.endpoint], prefix, gatewayId, TTL);
  children.push(started);
  return started;
}

const registration = { advertise_url: "grpc://127.0.0.1:7440", version: "0.1.0" };

describe("registration and discovery", () => {
  it("lists registered gateways and sees one leave when its lease is revoked", async () => {
    const prefix = freshPrefix();
    const a = await connect(prefix, "gw-a");
    const b = await connect(prefix, "gw-b");
    await a.register({ advertise_url: "grpc://10.0.0.5:7440", version: "0.1.0" });
    await b.register(registration);
    const seen = new Map<string, string | null>();
    await a.watchGateways((id, reg) => seen.set(id, reg?.advertise_url ?? null));
    const listed = await a.gateways();
    expect([...listed.keys()].sort()).toEqual(["gw-a", "gw-b"]);
    expect(listed.get("gw-a")).toMatchObject({ advertise_url: "grpc://10.0.0.5:7440", version: "0.1.0", lease: a.leaseStatus().leaseId });
    await b.close();
    await eventually(() => seen.get("gw-b") === null, { what: "gw-b's departure" });
    expect([...(await a.gateways()).keys()]).toEqual(["gw-a"]);
  });

  it("skips a registration edited by hand to garbage", async () => {
    const prefix = freshPrefix();
    const a = await connect(prefix, "gw-a");
    await a.register(registration);
    await raw.put(`${prefix}/gateways/gw-x`).value("{not json");
    await raw.put(`${prefix}/gateways/gw-y`).value(JSON.stringify({ advertise_url: "ftp://x", version: "1" }));
    expect([...(await a.gateways()).keys()]).toEqual(["gw-a"]);
  });

  it("refuses a second live process with the same gateway id", async () => {
    const prefix = freshPrefix();
    const first = await connect(prefix, "gw-a");
    await first.register(registration);
    const second = await connect(prefix, "gw-a");
    await expect(second.register(registration)).rejects.toMatchObject({ reason: "already_exists" });
  });
});

describe("leases", () => {
  it("a holder that stops renewing (SIGSTOP) loses its registration, and resumes self-fenced", async () => {
    const prefix = freshPrefix();
    const watcher = await connect(prefix, "gw-w");
    const holder = await child(prefix, "gw-h");
    const departed: string[] = [];
    await watcher.watchGateways((id, reg) => reg === null && departed.push(id));
    expect((await watcher.gateways()).has("gw-h")).toBe(true);
    holder.pause();
    await eventually(() => departed.includes("gw-h"), { what: "the paused holder's registration to expire" });
    const oldLease = (await holder.next((e) => e.event === "ready", "ready")).lease as string;
    expect(await watcher.leaseAlive(oldLease)).toBe(false);
    holder.resume();
    // On resume its own clock says the lease is past its safe deadline: lost before any I/O answers.
    const lost = await holder.next((e) => e.event === "lease" && e.phase === "lost", "the holder to self-fence");
    expect(lost.leaseId).toBe(oldLease);
    // etcd then says the lease is gone; a new lease is granted and the gateway registers again.
    await holder.next((e) => e.event === "lease" && e.phase === "valid" && e.leaseId !== oldLease, "a new lease");
    await eventually(async () => (await watcher.gateways()).get("gw-h")?.lease !== undefined, { what: "re-registration" });
    expect((await watcher.gateways()).get("gw-h")!.lease).not.toBe(oldLease);
  });

  it("a jump of the wall clock changes nothing: the lease lives on the monotonic clock", async () => {
    const prefix = freshPrefix();
    const a = await connect(prefix, "gw-a");
    const changes: string[] = [];
    a.onLeaseChange((c) => changes.push(c.phase));
    const realNow = Date.now.bind(Date);
    const until = () => a.leaseStatus().validUntil ?? 0;
    for (const jump of [86_400_000 * 365, -86_400_000 * 365]) {
      vi.spyOn(Date, "now").mockImplementation(() => realNow() + jump);
      const before = until();
      expect(a.leaseStatus().phase).toBe("valid");
      // Two renewals later (one every TTL/3), still valid, deadline moved on, no phase change.
      await eventually(() => until() > before + 1000, { what: `two renewals with the wall clock moved by ${jump} ms` });
      expect(a.leaseStatus().phase).toBe("valid");
      vi.restoreAllMocks();
    }
    expect(changes).toEqual([]);
  });
});

describe("authority records", () => {
  it("compare-and-swap: of two writers on one revision, one wins and the other sees what it lost to", async () => {
    const prefix = freshPrefix();
    const a = await connect(prefix, "gw-a");
    const b = await connect(prefix, "gw-b");
    await a.register(registration);
    await b.register(registration);
    const created = await a.writeAuthority("r1", "0", initialRecord("gw-a", a.requireLease(), 1, { replicas: ["gw-b"], min_insync: 1 }));
    expect(created.kind).toBe("written");
    const again = await b.writeAuthority("r1", "0", initialRecord("gw-b", b.requireLease(), 1));
    expect(again).toMatchObject({ kind: "conflict", current: { record: { gateway_id: "gw-a", epoch: 1 } } });
    const read = await a.readAuthority("r1");
    const isrChange = await a.writeAuthority("r1", read.modRevision, { ...read.record!, isr: ["gw-a", "gw-b"] });
    expect(isrChange.kind).toBe("written");
    const stale = await a.writeAuthority("r1", read.modRevision, { ...read.record!, isr: ["gw-a"] });
    expect(stale).toMatchObject({ kind: "conflict", current: { record: { isr: ["gw-a", "gw-b"] } } });
  });

  it("a write is bound to the writer's lease: without its registration under that lease it writes nothing", async () => {
    const prefix = freshPrefix();
    const a = await connect(prefix, "gw-a");
    const record = initialRecord("gw-a", a.requireLease(), 1);
    expect(await a.writeAuthority("r1", "0", record)).toEqual({ kind: "lease_lost" });
    expect((await a.readAuthority("r1")).text).toBeNull();
  });

  it("failover: an ISR member claims epoch + 1 only after the holder's lease expired (holder SIGKILLed)", async () => {
    const prefix = freshPrefix();
    const holder = await child(prefix, "gw-a");
    holder.send("create r1");
    expect((await holder.next((e) => e.event === "create", "create")).outcome).toMatchObject({ kind: "written" });
    const b = await connect(prefix, "gw-b");
    await b.register(registration);
    const r = await b.readAuthority("r1");
    await expect(b.writeAuthority("r1", r.modRevision, { ...r.record!, lease: b.requireLease() })).rejects.toMatchObject({
      reason: "refused",
    });
    // Put gw-b into the ISR the way the holder would (by hand here: the holder is a bare child).
    await raw
      .put(`${prefix}/rooms/r1/authority`)
      .value(encodeAuthorityRecord({ ...r.record!, isr: ["gw-a", "gw-b"], replicas: ["gw-a", "gw-b"] }));
    expect(await b.claimAuthority("r1", { mode: "automatic", localMaxEpoch: 1 })).toMatchObject({ kind: "refuse", code: "lease_valid" });
    expect(await b.claimAuthority("r1", { mode: "promote_unclean", localMaxEpoch: 1 })).toMatchObject({
      kind: "refuse",
      code: "lease_valid",
    });
    await holder.kill9();
    await eventually(async () => !(await b.leaseAlive(r.record!.lease!)), {
      timeoutMs: 10_000,
      what: "the killed holder's lease to expire",
    });
    const claimed = await b.claimAuthority("r1", { mode: "automatic", localMaxEpoch: 1 });
    expect(claimed).toMatchObject({
      kind: "claimed",
      record: { gateway_id: "gw-b", epoch: 2, isr: ["gw-b"], lease: b.requireLease() },
      previous: { gateway_id: "gw-a", epoch: 1 },
    });
    expect((await b.readAuthority("r1")).record).toMatchObject({ gateway_id: "gw-b", epoch: 2 });
  });

  it("a record edited by hand to garbage or to a lower epoch is refused, never adopted", async () => {
    const prefix = freshPrefix();
    const b = await connect(prefix, "gw-b");
    await b.register(registration);
    const key = `${prefix}/rooms/r1/authority`;
    const versions: Array<string | null> = [];
    await b.watchAuthority("r1", (read) =>
      versions.push(read.problem ?? (read.record ? `${read.record.gateway_id}@${read.record.epoch}` : null)),
    );
    await raw.put(key).value('{"gateway_id": "gw-a", "epoch": "lots"}');
    const garbage = await b.readAuthority("r1");
    expect(garbage.record).toBeNull();
    expect(garbage.problem).toMatch(/format/);
    expect(assessAuthorityRecord({ gateway_id: "gw-a", epoch: 3 }, garbage.text)).toMatchObject({ kind: "refuse", problem: "malformed" });
    expect(await b.claimAuthority("r1", { mode: "automatic", localMaxEpoch: 3 })).toMatchObject({ kind: "refuse", code: "record_invalid" });
    expect(await b.claimAuthority("r1", { mode: "promote_unclean", localMaxEpoch: 3 })).toMatchObject({
      kind: "refuse",
      code: "record_invalid",
    });
    expect((await b.readAuthority("r1")).text).toBe(garbage.text);
    await raw.put(key).value(
      encodeAuthorityRecord({
        gateway_id: "gw-a",
        epoch: 1,
        isr: ["gw-a", "gw-b"],
        replicas: ["gw-a", "gw-b"],
        min_insync: 1,
        lease: null,
      }),
    );
    const lower = await b.readAuthority("r1");
    expect(assessAuthorityRecord({ gateway_id: "gw-a", epoch: 3 }, lower.text)).toMatchObject({
      kind: "refuse",
      problem: "epoch_regression",
    });
    // A claim from it still goes above the epoch this gateway knows.
    expect(await b.claimAuthority("r1", { mode: "automatic", localMaxEpoch: 3 })).toMatchObject({ kind: "claimed", record: { epoch: 4 } });
    await eventually(() => versions.at(-1) === "gw-b@4", { what: "the watch to report every version" });
    expect(versions.some((v) => v?.includes("format"))).toBe(true);
  });
});

describe("singletons", () => {
  it("hands over when its holder process is killed with SIGKILL", async () => {
    const prefix = freshPrefix();
    const holder = await child(prefix, "gw-a");
    holder.send("singleton poller");
    await holder.next((e) => e.event === "acquired", "the child to acquire the singleton");
    const b = await connect(prefix, "gw-b");
    const events: string[] = [];
    const handle = b.singleton("poller", { onAcquired: () => events.push("acquired"), onLost: () => events.push("lost") });
    await eventually(() => handle.holder() === "gw-a", { what: "gw-b to see gw-a holding" });
    expect(handle.holding()).toBe(false);
    expect(events).toEqual([]);
    await holder.kill9();
    await eventually(() => handle.holding(), { timeoutMs: 10_000, what: "the hand-over to gw-b" });
    expect(events).toEqual(["acquired"]);
    expect(handle.holder()).toBe("gw-b");
    await handle.release();
    expect(events).toEqual(["acquired", "lost"]);
    expect(await raw.get(`${prefix}/singletons/poller`).string()).toBeNull();
  });

  it("one holder at a time among three competitors; release hands it on at once", async () => {
    const prefix = freshPrefix();
    const coordinators = await Promise.all(["gw-a", "gw-b", "gw-c"].map((id) => connect(prefix, id)));
    const handles = coordinators.map((c) => c.singleton("job", { onAcquired: () => undefined, onLost: () => undefined }));
    await eventually(() => handles.some((h) => h.holding()), { what: "a holder" });
    expect(handles.filter((h) => h.holding())).toHaveLength(1);
    const first = handles.findIndex((h) => h.holding());
    await handles[first]!.release();
    await eventually(() => handles.some((h, i) => i !== first && h.holding()), { what: "the next holder" });
    expect(handles.filter((h) => h.holding())).toHaveLength(1);
  });
});

describe("etcd unreachable", () => {
  it("at start: a typed error that says what to do", async () => {
    const started = performance.now();
    const err = await Coordinator.connect({
      endpoints: [await deadEndpoint()],
      prefix: "/hermes",
      gatewayId: "gw-a",
      leaseTtlSeconds: TTL,
      connectTimeoutMs: 1000,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HermesError);
    expect(err).toMatchObject({ reason: "coordinator_unavailable", exitCode: 2 });
    expect((err as HermesError).message).toMatch(/cannot reach the coordinator .* Start etcd/);
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  it("refuses bad settings before any I/O", async () => {
    const base = { endpoints: [etcd.endpoint], prefix: "/hermes", gatewayId: "gw-a", leaseTtlSeconds: TTL };
    await expect(Coordinator.connect({ ...base, endpoints: ["127.0.0.1:2379"] })).rejects.toMatchObject({ reason: "invalid_config" });
    await expect(Coordinator.connect({ ...base, prefix: "/" })).rejects.toMatchObject({ reason: "invalid_config" });
    await expect(Coordinator.connect({ ...base, leaseTtlSeconds: 0 })).rejects.toMatchObject({ reason: "invalid_config" });
    await expect(Coordinator.connect({ ...base, gatewayId: "a/b" })).rejects.toMatchObject({ reason: "invalid_config" });
  });
});
