// A coordinated mesh for the quorum scenarios: a 3-member etcd cluster and three gateways on one
// network, every gateway started with HERMES_COORDINATOR (all etcd members), HERMES_ADVERTISE_URL
// (its alias) and the mesh key, with a short lease TTL so failovers fit the suite's time budget.
//
//   const qm = await QuorumMesh.start(mesh, { ttlSeconds: 3 });
//   await qm.createRoom("kill", qm.gateway("gw-a"));                  // quorum, replicas gw-b + gw-c, min_insync 2
//   const writer = qm.writer(ledger, "kill", "w", { concurrency: 4 }); // follows the authority around
//   ...fault...; await writer.stop(); await qm.restoreAll();
//   const final = await qm.converge("kill");                          // one authority, equal logs everywhere
//   assertQuorumClean("kill", verifyQuorum(ledger, await qm.observe("kill", final)), { failoverSeconds });
import { randomBytes } from "node:crypto";
import { HermesError } from "@hermes/common";
import type { Room } from "@hermes/proto/hermes/v1/rooms";
import type { EtcdCluster } from "./etcd.js";
import type { Ledger, SendRecord } from "./ledger.js";
import type { Mesh } from "./mesh.js";
import type { GatewayNode, MeshNetwork, MeshNode } from "./node.js";
import type { QuorumObservation } from "./quorum-ledger.js";
import { NodeDownError, RoomsClient } from "./rooms-client.js";
import { eventually } from "./wait.js";

export const COORDINATOR_PREFIX = "/hermes";
/** Calls from a quorum writer give up quickly, so a paused gateway costs a client 2 s, not 10. */
const WRITER_CALL_TIMEOUT_MS = 2_000;

export interface QuorumMeshOptions {
  /** coordinator.etcd.lease_ttl_seconds (default 3). */
  ttlSeconds?: number;
  gateways?: string[];
}

/** Sends to a quorum room that were never appended: safe to call "refused" (they must never show up). */
const NEVER_APPENDED = new Set(["not_authority", "authority_conflict", "room_retired", "room_disbanded", "idempotency_conflict"]);

/**
 * The ledger outcome of a failed quorum send: refusals that happen before anything is appended are
 * definite; `not_enough_replicas`, `lease_lost` and `coordinator_unavailable` may come for a send that
 * was already in the log waiting for its acks, so they count as unacknowledged-and-indeterminate.
 */
export function quorumRefusal(err: unknown): string | undefined {
  if (err instanceof NodeDownError) return "not_sent_gateway_down";
  return err instanceof HermesError && NEVER_APPENDED.has(err.reason) ? err.reason : undefined;
}

/** The reason of a failed send, for counting (`not_enough_replicas`, `lease_lost`, a transport code…). */
export function failureReason(err: unknown): string {
  if (err instanceof NodeDownError) return "gateway_down";
  if (err instanceof HermesError) return err.reason;
  return err instanceof Error ? err.message.slice(0, 80) : String(err);
}

export interface QuorumWriter {
  /** Sends so far (all outcomes). */
  count(): number;
  /** Failure reasons seen so far, with counts. */
  reasons(): Map<string, number>;
  stop(): Promise<void>;
}

export class QuorumMesh {
  /** Heals of cuts made through this object, undone by restoreAll(). */
  private readonly heals: Array<() => Promise<void>> = [];

  private constructor(
    readonly mesh: Mesh,
    readonly lan: MeshNetwork,
    readonly etcd: EtcdCluster,
    readonly gateways: GatewayNode[],
    readonly ttlSeconds: number,
    private readonly clients: Map<string, RoomsClient>,
    private readonly writerClients: Map<string, RoomsClient>,
  ) {}

  static async start(mesh: Mesh, options: QuorumMeshOptions = {}): Promise<QuorumMesh> {
    const ttlSeconds = options.ttlSeconds ?? 3;
    const names = options.gateways ?? ["gw-a", "gw-b", "gw-c"];
    const lan = await mesh.network("lan");
    const etcd = await mesh.etcdCluster({ networks: [lan] });
    const meshKey = randomBytes(24).toString("hex");
    // The endpoints are in HERMES_COORDINATOR too (which wins): the file form is what an operator writes.
    const config = [
      "coordinator:",
      "  etcd:",
      `    endpoints: [${etcd.endpoints.map((e) => JSON.stringify(e)).join(", ")}]`,
      `    prefix: ${COORDINATOR_PREFIX}`,
      `    lease_ttl_seconds: ${ttlSeconds}`,
      // A replica cut off leaves the in-sync set after 2 s instead of 10 (the replica-cut scenario waits for it).
      "  max_lag: {events: 1000, seconds: 2}",
      "rooms:",
      "  follow_max_backoff_seconds: 1",
      "",
    ].join("\n");
    // One after the other: a gateway takes its lease early in its start, and three starting at once on
    // two cores can starve one's event loop past 80 % of a short TTL before it has registered.
    const gateways: GatewayNode[] = [];
    for (const name of names) {
      gateways.push(
        await mesh.gateway({
          name,
          networks: [lan],
          config,
          env: { HERMES_COORDINATOR: etcd.coordinatorUrl, HERMES_ADVERTISE_URL: `grpc://${name}:7440`, HERMES_MESH_KEY: meshKey },
        }),
      );
    }
    const clients = new Map(gateways.map((g) => [g.name, RoomsClient.of(g)]));
    const writerClients = new Map(gateways.map((g) => [g.name, RoomsClient.of(g, { callTimeoutMs: WRITER_CALL_TIMEOUT_MS })]));
    return new QuorumMesh(mesh, lan, etcd, gateways, ttlSeconds, clients, writerClients);
  }

  gateway(name: string): GatewayNode {
    const g = this.gateways.find((x) => x.name === name);
    if (!g) throw new Error(`no gateway ${name}`);
    return g;
  }

  rooms(name: string): RoomsClient {
    const r = this.clients.get(name);
    if (!r) throw new Error(`no gateway ${name}`);
    return r;
  }

  others(g: GatewayNode): GatewayNode[] {
    return this.gateways.filter((x) => x !== g);
  }

  /** A quorum room led by `creator`, the two other gateways its replicas; waits until all three are in sync. */
  async createRoom(roomId: string, creator: GatewayNode, options: { minInsync?: number } = {}): Promise<void> {
    // After the previous scenario's faults a gateway may still be renewing a lapsed lease: it refuses
    // a quorum create with coordinator_unavailable until it holds one again (nothing is written).
    await eventually(
      async () => {
        try {
          await this.rooms(creator.name).create(roomId, `Quorum ${roomId}`, ["alice", "bob"], {
            mode: "quorum",
            replicas: this.others(creator).map((g) => g.name),
            min_insync: options.minInsync ?? 2,
          });
          return true;
        } catch (err) {
          if (err instanceof HermesError && err.reason === "coordinator_unavailable") return false;
          throw err;
        }
      },
      { what: `${creator.name} to hold its coordinator lease and create ${roomId}`, timeoutMs: 30_000 },
    );
    await this.waitIsr(roomId, this.gateways.length);
  }

  /** The authority record in etcd (gateway and epoch, ISR), read from the test process. */
  async record(roomId: string): Promise<{ gateway_id: string; epoch: number; isr: string[]; lease: string | null }> {
    const text = await this.etcd.get(`${COORDINATOR_PREFIX}/rooms/${roomId}/authority`);
    if (text === null) throw new Error(`no authority record for ${roomId}`);
    return JSON.parse(text);
  }

  /** Waits until the recorded ISR has `size` members (e.g. all three after a heal). */
  async waitIsr(roomId: string, size: number, timeoutMs = 30_000): Promise<string[]> {
    return eventually(
      async () => {
        const isr = (await this.record(roomId)).isr;
        return isr.length === size ? isr : false;
      },
      { what: `the ISR of ${roomId} to have ${size} members`, timeoutMs },
    );
  }

  /** cut() through the mesh, remembered so restoreAll() heals it even when a test fails half-way. */
  async cut(a: MeshNode, b: MeshNode | readonly MeshNode[]): Promise<() => Promise<void>> {
    const heal = Array.isArray(b) ? await this.mesh.cutAll(a, b) : await this.mesh.cut(a, b as MeshNode);
    let healed = false;
    const once = async () => {
      if (healed) return;
      healed = true;
      await heal();
    };
    this.heals.push(once);
    return once;
  }

  /** Heals every cut, resumes every paused node and restarts every crashed one; etcd healthy again. */
  async restoreAll(): Promise<void> {
    for (const heal of this.heals.splice(0)) await heal();
    const nodes: MeshNode[] = [...this.etcd.members, ...this.gateways];
    for (const n of nodes) if (n.paused) await n.resume();
    await Promise.all(nodes.filter((n) => !n.running).map((n) => n.restart()));
    await this.etcd.waitHealthy();
  }

  /**
   * `concurrency` loops sending `prefix-<n>` to the room, each send in the ledger as sent to (`via`)
   * the gateway that answered. They share one idea of where the authority is: a `not_authority`
   * refusal names the new one (`data.authority`); any other failure moves to the next gateway.
   */
  writer(ledger: Ledger, roomId: string, prefix: string, options: { concurrency?: number; pauseMs?: number } = {}): QuorumWriter {
    let stopped = false;
    let n = 0;
    let target = 0;
    const reasons = new Map<string, number>();
    const names = this.gateways.map((g) => g.name);
    const loops = Array.from({ length: options.concurrency ?? 4 }, async () => {
      while (!stopped) {
        const at = target;
        const via = names[at] as string;
        const rooms = this.writerClients.get(via) as RoomsClient;
        const eventId = `${prefix}-${n++}`;
        let failure: unknown;
        const rec: SendRecord = await ledger.record(
          { eventId, room: roomId, via },
          () => rooms.send(roomId, eventId, `message ${eventId}`),
          {
            ack: (r) => ({ seq: r.event!.seq, epoch: r.event!.epoch }),
            refusal: (err) => {
              failure = err;
              return quorumRefusal(err);
            },
          },
        );
        if (rec.outcome === "acked") {
          if (options.pauseMs) await new Promise((r) => setTimeout(r, options.pauseMs));
          continue;
        }
        const reason = failureReason(failure);
        reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
        const named = failure instanceof HermesError ? (failure.data.authority as { gateway_id?: string } | undefined) : undefined;
        const next = named?.gateway_id ? names.indexOf(named.gateway_id) : -1;
        if (target === at) target = next >= 0 && next !== at ? next : (at + 1) % names.length;
        await new Promise((r) => setTimeout(r, 50));
      }
    });
    return {
      count: () => n,
      reasons: () => new Map(reasons),
      async stop() {
        stopped = true;
        await Promise.all(loops);
      },
    };
  }

  /** Room state on every running gateway (those that answer). */
  async states(roomId: string): Promise<Map<string, Room>> {
    const out = new Map<string, Room>();
    await Promise.all(
      this.gateways
        .filter((g) => g.running && !g.paused)
        .map(async (g) => {
          try {
            out.set(g.name, await this.rooms(g.name).state(roomId));
          } catch {
            // not answering now
          }
        }),
    );
    return out;
  }

  /**
   * Waits until every gateway answers with the same authority and epoch as the record in etcd, and
   * holds as many events as the authority: the logs can then be compared whole. Returns the authority.
   */
  async converge(roomId: string, timeoutMs = 60_000): Promise<{ authority: string; epoch: number; latestSeq: number }> {
    return eventually(
      async () => {
        const record = await this.record(roomId);
        const states = await this.states(roomId);
        if (states.size !== this.gateways.length) return false;
        const lead = states.get(record.gateway_id);
        if (lead?.role !== "authority" || lead.authority_epoch !== record.epoch) return false;
        for (const s of states.values()) {
          if (s.authority_gateway_id !== record.gateway_id || s.authority_epoch !== record.epoch || s.latest_seq !== lead.latest_seq)
            return false;
        }
        return { authority: record.gateway_id, epoch: record.epoch, latestSeq: lead.latest_seq };
      },
      { what: `every gateway to agree on ${roomId} and hold the whole log`, timeoutMs, intervalMs: 500 },
    );
  }

  /** Every gateway's main log and divergent branches, for verifyQuorum(). */
  async observe(roomId: string, authority: string): Promise<QuorumObservation> {
    const logs = await Promise.all(
      this.gateways.map(async (g) => ({
        gateway: g.name,
        events: (await this.rooms(g.name).fullLog(roomId)).map((e) => ({ seq: e.seq, eventId: e.event_id, epoch: e.epoch, hash: e.hash })),
      })),
    );
    const branches = (await Promise.all(this.gateways.map((g) => this.rooms(g.name).divergence(roomId)))).flat();
    const divergent = branches.filter((b) => !b.markers_only).flatMap((b) => b.events.map((e) => ({ eventId: e.event_id })));
    return { room: roomId, authority, logs, divergent };
  }

  close(): void {
    for (const r of [...this.clients.values(), ...this.writerClients.values()]) r.close();
  }
}
