import { HermesError } from "@hermes/common/client";
import type { Etcd3, IKeyValue, ITxnResponse } from "etcd3";
import { type ClaimInput, type ClaimMode, type ClaimRefusal, decideClaim } from "../core/authority.js";
import {
  type AuthorityRecord,
  assessAuthorityRecord,
  encodeAuthorityRecord,
  type KnownAuthority,
  parseAuthorityRecord,
} from "../core/authority-record.js";
import { refuse } from "../core/decision.js";
import { type CoordinatorKeys, coordinatorKeys, isValidGatewayId } from "../core/keys.js";
import { DEFAULT_SAFETY_MARGIN, type LeaseStatus, leasePolicy } from "../core/lease.js";
import { encodeRegistration, type GatewayRegistration, parseRegistration, registrationProblem } from "../core/registration.js";
import { createEtcdClient, isLeaseGone, unavailable, withTimeout } from "./client.js";
import { type LeaseChange, LeaseKeeper } from "./lease-keeper.js";
import { type SingletonHandle, type SingletonHandlers, SingletonRunner } from "./singleton.js";
import { type WatchHandle, type WatchHandlers, watchForever } from "./watch.js";

export interface CoordinatorOptions {
  /** etcd client URLs, e.g. ["http://127.0.0.1:2379"]. */
  endpoints: string[];
  /** Key prefix of the mesh, e.g. "/hermes". */
  prefix: string;
  gatewayId: string;
  leaseTtlSeconds: number;
  /** Fraction of the TTL held back from lease validity (default 0.2). */
  safetyMargin?: number;
  /** Deadline of one etcd call (default: a quarter of the TTL, at least 250 ms, at most 5 s). */
  callTimeoutMs?: number;
  /** How long `connect` tries before it reports etcd unreachable (default 5 s). */
  connectTimeoutMs?: number;
  /** Monotonic clock in ms (default performance.now). Never the wall clock. */
  now?: () => number;
  /** Background failures (a re-registration after a new lease, a watch restart); silent by default. */
  onBackgroundError?: (err: HermesError) => void;
  /** Each answered lease keep-alive, with its round trip in seconds. */
  onLeaseRenewed?: (seconds: number) => void;
}

/** A key as read: its text (null when missing) and its `mod_revision` ("0" when missing). */
export interface KeyRead {
  text: string | null;
  modRevision: string;
}

export interface AuthorityRead extends KeyRead {
  /** The parsed record; null when the key is missing or not a valid record (see `problem`). */
  record: AuthorityRecord | null;
  problem: string | null;
}

export type CasResult =
  | { kind: "written"; modRevision: string }
  /** The record changed since it was read; `current` is what it is now. */
  | { kind: "conflict"; current: AuthorityRead }
  /** This gateway's lease is not valid (or its registration is not under it): it may write nothing. */
  | { kind: "lease_lost" };

export type ClaimOutcome =
  | {
      kind: "claimed";
      record: AuthorityRecord;
      modRevision: string;
      previous: { gateway_id: string; epoch: number } | null;
      unclean: boolean;
    }
  | ClaimRefusal
  | ReturnType<typeof refuse<"record_invalid" | "lease_lost">>
  | { kind: "conflict"; current: AuthorityRead };

export interface RegisteredGateway extends GatewayRegistration {
  gateway_id: string;
  lease: string;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 5000;

/**
 * The etcd side of a coordinated mesh for one gateway: one lease (kept alive on the monotonic clock),
 * the gateway's registration under it, discovery of the others, the authority records of rooms
 * (read, compare-and-swap bound to the lease, claim, watch) and singletons. Decisions come from
 * ../core; this class does the I/O. Every call that cannot reach etcd fails `coordinator_unavailable`.
 */
export class Coordinator {
  readonly keys: CoordinatorKeys;
  readonly gatewayId: string;
  private readonly client: Etcd3;
  private readonly lease: LeaseKeeper;
  private readonly endpoints: string[];
  private readonly watches = new Set<WatchHandle>();
  private readonly singletons = new Set<SingletonRunner>();
  private registration: GatewayRegistration | null = null;
  /** The lease the registration was last written under. */
  private registeredLease: string | null = null;
  private closed = false;

  private constructor(
    private readonly options: CoordinatorOptions,
    client: Etcd3,
    lease: LeaseKeeper,
  ) {
    this.keys = coordinatorKeys(options.prefix);
    this.gatewayId = options.gatewayId;
    this.client = client;
    this.lease = lease;
    this.endpoints = [...options.endpoints];
    lease.onChange((change) => this.leaseChanged(change));
  }

  /**
   * Connects and takes a lease. When etcd cannot be reached within `connectTimeoutMs` this rejects with
   * `coordinator_unavailable` and a message that says what to check (the caller exits 2 with it).
   */
  static async connect(options: CoordinatorOptions): Promise<Coordinator> {
    if (!isValidGatewayId(options.gatewayId))
      throw new HermesError("invalid_config", `invalid gateway id ${JSON.stringify(options.gatewayId)}`);
    coordinatorKeys(options.prefix);
    const policy = leasePolicy(options.leaseTtlSeconds, options.safetyMargin ?? DEFAULT_SAFETY_MARGIN);
    const callTimeoutMs = options.callTimeoutMs ?? Math.min(5000, Math.max(250, policy.ttlMs / 4));
    const client = createEtcdClient({ endpoints: options.endpoints, callTimeoutMs });
    const lease = new LeaseKeeper(client, policy, options.now ?? (() => performance.now()), options.onLeaseRenewed);
    const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    const started = performance.now();
    for (;;) {
      try {
        await lease.start();
        return new Coordinator(options, client, lease);
      } catch (err) {
        if (performance.now() - started + 200 > connectTimeoutMs) {
          client.close();
          const detail = err instanceof Error ? err.message : String(err);
          throw new HermesError(
            "coordinator_unavailable",
            // The detail in parentheses: a transport's wording (grpc-js's "Resolution note: …") ends at the parenthesis, never eating the advice.
            `cannot reach the coordinator (etcd at ${options.endpoints.join(", ")}) within ${connectTimeoutMs} ms (${detail}). ` +
              "Start etcd (Debian package etcd-server), or fix coordinator.etcd.endpoints (HERMES_COORDINATOR), or remove the coordinator setting to run without one.",
            { data: { endpoints: [...options.endpoints] }, cause: err },
          );
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  leaseStatus(): LeaseStatus {
    return this.lease.status();
  }

  /**
   * The lease id, when the lease is valid by this process's clock; else `coordinator_unavailable`
   * when etcd did not answer the last renewal (what to fix is etcd), or `lease_lost`.
   */
  requireLease(): string {
    const status = this.lease.status();
    if (status.phase !== "valid" || status.leaseId === null) {
      if (!this.lease.etcdAnswering()) {
        throw new HermesError(
          "coordinator_unavailable",
          `gateway ${this.gatewayId} cannot reach the coordinator (etcd at ${this.endpoints.join(", ")}) and its lease is past its safe deadline; it acts on nothing that needs the coordinator until etcd answers again`,
          { data: { endpoints: [...this.endpoints], lease: status.phase } },
        );
      }
      throw new HermesError(
        "lease_lost",
        `gateway ${this.gatewayId} holds no valid coordinator lease (${status.phase}); it acts on nothing until it has one`,
      );
    }
    return status.leaseId;
  }

  /** The lease id once it is valid, waiting for a renewal until `deadline` (monotonic); then `lease_lost`. */
  private async validLease(deadline: number): Promise<string> {
    for (;;) {
      const status = this.lease.status();
      if (status.phase === "valid" && status.leaseId !== null) return status.leaseId;
      if (performance.now() > deadline || this.closed) return this.requireLease();
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  onLeaseChange(listener: (change: LeaseChange) => void): () => void {
    return this.lease.onChange(listener);
  }

  // --- registration and discovery -----------------------------------------------------------------

  /**
   * Registers this gateway (`<prefix>/gateways/<id>` under its lease) and keeps it registered under
   * every later lease. A registration left by an earlier process of this gateway (killed, its lease
   * not yet expired) is waited out; one that stays alive is another live process with this id:
   * `already_exists`.
   */
  async register(registration: GatewayRegistration): Promise<void> {
    const problem = registrationProblem(registration);
    if (problem) throw new HermesError("invalid_config", `invalid gateway registration: ${problem}`);
    this.registration = { advertise_url: registration.advertise_url, version: registration.version };
    await this.putRegistration();
  }

  private async putRegistration(): Promise<void> {
    const registration = this.registration;
    if (!registration) return;
    const key = this.keys.gateway(this.gatewayId);
    // An earlier process's lease has at most one TTL left.
    const waitUntil = performance.now() + this.options.leaseTtlSeconds * 1000 + 1000;
    const put = (leaseId: string) => this.client.put(key).value(encodeRegistration(registration)).lease(leaseId);
    for (;;) {
      // A start that kept the event loop busy past the lease's safe deadline has a lease again after its next renewal.
      const leaseId = await this.validLease(waitUntil);
      // No registration yet, or ours under this lease (etcd has no OR in a compare, so two tries).
      const fresh = await this.registrationTxn(() =>
        this.client.if(key, "Create", "==", 0).then(put(leaseId)).else(this.client.get(key)).commit(),
      );
      if (fresh.succeeded) {
        this.registeredLease = leaseId;
        return;
      }
      const holder = fresh.responses[0]?.response_range.kvs[0];
      if (holder && String(holder.lease) === leaseId) {
        const ours = await this.registrationTxn(() => this.client.if(key, "Lease", "==", leaseId).then(put(leaseId)).commit());
        if (ours.succeeded) {
          this.registeredLease = leaseId;
          return;
        }
        continue;
      }
      if (holder && !(await this.leaseAlive(String(holder.lease)))) {
        await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      if (performance.now() > waitUntil) {
        throw new HermesError(
          "already_exists",
          `another live process is registered as gateway ${this.gatewayId} (lease ${holder?.lease}); gateway ids are unique in a mesh`,
          { data: { gateway_id: this.gatewayId } },
        );
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  private registrationTxn(txn: () => Promise<ITxnResponse>): Promise<ITxnResponse> {
    return this.call("registering the gateway", txn).catch((err) => {
      throw isLeaseGone(err) ? this.leaseLost() : err;
    });
  }

  /** The registered gateways (invalid values are skipped). */
  async gateways(): Promise<Map<string, RegisteredGateway>> {
    const res = await this.call("listing gateways", () => this.client.getAll().prefix(this.keys.gatewaysPrefix).exec());
    const found = new Map<string, RegisteredGateway>();
    for (const kv of res.kvs) {
      const registered = this.registeredGateway(kv);
      if (registered) found.set(registered.gateway_id, registered);
    }
    return found;
  }

  /** Calls `onChange(id, registration)` on each registration and `onChange(id, null)` on each departure. */
  async watchGateways(
    onChange: (gatewayId: string, registration: RegisteredGateway | null) => void,
    onResync: () => void = () => undefined,
  ): Promise<WatchHandle> {
    return this.watch(
      { prefix: this.keys.gatewaysPrefix },
      {
        onPut: (kv) => {
          const registered = this.registeredGateway(kv);
          if (registered) onChange(registered.gateway_id, registered);
        },
        onDelete: (kv) => {
          const id = this.keys.gatewayIdOf(kv.key.toString("utf8"));
          if (id) onChange(id, null);
        },
        onResync,
      },
    );
  }

  private registeredGateway(kv: IKeyValue): RegisteredGateway | null {
    const id = this.keys.gatewayIdOf(kv.key.toString("utf8"));
    const registration = parseRegistration(kv.value.toString("utf8"));
    return id && registration ? { gateway_id: id, ...registration, lease: String(kv.lease) } : null;
  }

  // --- leases of others ---------------------------------------------------------------------------

  /** Whether etcd still holds the lease (a lease that expired never comes back). */
  async leaseAlive(leaseId: string): Promise<boolean> {
    return (await this.leaseTtlMs(leaseId)) > 0;
  }

  /** What etcd says is left of a lease, in ms (whole seconds; 0 when it is gone). */
  async leaseTtlMs(leaseId: string): Promise<number> {
    if (!/^[1-9][0-9]*$/.test(leaseId)) return 0;
    const res = await this.call("checking a lease", () => this.client.leaseClient.leaseTimeToLive({ ID: leaseId }));
    return Math.max(0, Number(res.TTL)) * 1000;
  }

  // --- authority records --------------------------------------------------------------------------

  async readAuthority(roomId: string): Promise<AuthorityRead> {
    const res = await this.call("reading an authority record", () => this.client.get(this.keys.authority(roomId)).exec());
    return authorityRead(res.kvs[0] ?? null);
  }

  /** Every room's authority record (as read: invalid ones with their problem). */
  async authorities(): Promise<Map<string, AuthorityRead>> {
    const res = await this.call("listing authority records", () => this.client.getAll().prefix(this.keys.roomsPrefix).exec());
    const found = new Map<string, AuthorityRead>();
    for (const kv of res.kvs) {
      const roomId = this.keys.roomIdOf(kv.key.toString("utf8"));
      if (roomId) found.set(roomId, authorityRead(kv));
    }
    return found;
  }

  /**
   * Calls `onRecord(roomId, read)` for every change of any room's record (a deleted one as a missing
   * key), and `onResync` when the watch (re)started and may have missed changes (re-read them all).
   */
  async watchAuthorities(onRecord: (roomId: string, read: AuthorityRead) => void, onResync: () => void): Promise<WatchHandle> {
    const roomOf = (kv: IKeyValue) => this.keys.roomIdOf(kv.key.toString("utf8"));
    return this.watch(
      { prefix: this.keys.roomsPrefix },
      {
        onPut: (kv) => {
          const roomId = roomOf(kv);
          if (roomId) onRecord(roomId, authorityRead(kv));
        },
        onDelete: (kv) => {
          const roomId = roomOf(kv);
          if (roomId) onRecord(roomId, authorityRead(null));
        },
        onResync,
      },
    );
  }

  /**
   * Compare-and-swap of a room's authority record: written only if the key's `mod_revision` is still
   * `expectedModRevision` ("0": the key must not exist) AND this gateway's registration is under its
   * current lease, in one etcd transaction. So a gateway whose lease expired can write nothing, even
   * if it does not know yet. The record must name this gateway, under its lease (or none: a release).
   */
  async writeAuthority(roomId: string, expectedModRevision: string, record: AuthorityRecord): Promise<CasResult> {
    if (record.gateway_id !== this.gatewayId) {
      throw new HermesError(
        "refused",
        `gateway ${this.gatewayId} writes only authority records that name itself, not ${record.gateway_id}`,
      );
    }
    const status = this.lease.status();
    if (status.phase !== "valid" || status.leaseId === null) return { kind: "lease_lost" };
    if (record.lease !== null && record.lease !== status.leaseId) {
      throw new HermesError("refused", `an authority record names the lease it is held by (${status.leaseId}), or none once released`);
    }
    const key = this.keys.authority(roomId);
    const own = this.keys.gateway(this.gatewayId);
    const res = await this.call("writing an authority record", () =>
      this.client
        .if(key, "Mod", "==", expectedModRevision)
        .and(own, "Lease", "==", status.leaseId!)
        .then(this.client.put(key).value(encodeAuthorityRecord(record)))
        .else(this.client.get(key), this.client.get(own))
        .commit(),
    );
    if (res.succeeded) return { kind: "written", modRevision: String(res.header.revision) };
    const current = authorityRead(res.responses[0]?.response_range.kvs[0] ?? null);
    const ownKv = res.responses[1]?.response_range.kvs[0];
    if (!ownKv || String(ownKv.lease) !== status.leaseId) return { kind: "lease_lost" };
    return { kind: "conflict", current };
  }

  /**
   * Reads the record, checks whether the lease it names is alive, applies the claim rule and writes
   * the claim by compare-and-swap. `localMaxEpoch` is the highest epoch for the room in this
   * gateway's own durable state. Manual promotes go through here too, so they cannot race a failover.
   */
  async claimAuthority(
    roomId: string,
    input: { mode: ClaimMode; localMaxEpoch: number; known?: KnownAuthority | null; policy?: ClaimInput["policy"] },
  ): Promise<ClaimOutcome> {
    const status = this.lease.status();
    if (status.phase !== "valid" || status.leaseId === null) {
      return refuse("lease_lost", "lease_lost", `gateway ${this.gatewayId} holds no valid coordinator lease; it claims nothing`);
    }
    const read = await this.readAuthority(roomId);
    if (read.text !== null && read.record === null) {
      return refuse(
        "record_invalid",
        "refused",
        `the authority record of room ${roomId} is not valid (${read.problem}); refusing to act on it`,
        {
          room_id: roomId,
        },
      );
    }
    // A record below (or beside) what this gateway knows is hand-made: never build a claim on it.
    const assessed = read.text === null || input.known === undefined ? null : assessAuthorityRecord(input.known, read.text);
    if (assessed?.kind === "refuse") {
      return refuse("record_invalid", "refused", `room ${roomId}: ${assessed.message}; refusing to act on it`, {
        room_id: roomId,
        problem: assessed.problem,
      });
    }
    const recordLeaseAlive = read.record?.lease ? await this.leaseAlive(read.record.lease) : false;
    const decision = decideClaim({
      self: this.gatewayId,
      selfLease: status.leaseId,
      mode: input.mode,
      record: read.record,
      recordLeaseAlive,
      localMaxEpoch: input.localMaxEpoch,
      policy: input.policy,
    });
    if (decision.kind === "refuse") return decision;
    const written = await this.writeAuthority(roomId, read.modRevision, decision.record);
    if (written.kind === "lease_lost")
      return refuse("lease_lost", "lease_lost", `gateway ${this.gatewayId} lost its lease while claiming room ${roomId}`);
    if (written.kind === "conflict") return written;
    return {
      kind: "claimed",
      record: decision.record,
      modRevision: written.modRevision,
      previous: decision.previous,
      unclean: decision.unclean,
    };
  }

  /** Calls `onRecord` with every version of the room's record (and once at start, and after each resync). */
  async watchAuthority(roomId: string, onRecord: (read: AuthorityRead) => void): Promise<WatchHandle> {
    const key = this.keys.authority(roomId);
    const reread = () => {
      this.readAuthority(roomId).then(onRecord, (err) => this.backgroundError(err));
    };
    return this.watch(
      { key },
      { onPut: (kv) => onRecord(authorityRead(kv)), onDelete: () => onRecord(authorityRead(null)), onResync: reread },
    );
  }

  // --- singletons ---------------------------------------------------------------------------------

  /**
   * Runs `handlers.onAcquired` when this gateway becomes the one holder of `name` in the mesh and
   * `handlers.onLost` when it stops being it (another took it, its lease was lost, or `release`).
   * The job must run only between the two.
   */
  singleton(name: string, handlers: SingletonHandlers): SingletonHandle {
    const runner = new SingletonRunner(
      {
        client: this.client,
        key: this.keys.singleton(name),
        gatewayId: this.gatewayId,
        lease: () => this.lease.status(),
        call: (what, work) => this.call(what, work),
        watch: (target, watchHandlers) => this.watch(target, watchHandlers),
        backgroundError: (err) => this.backgroundError(err),
      },
      handlers,
    );
    this.singletons.add(runner);
    runner.start();
    return {
      holding: () => runner.holding,
      holder: () => runner.holder,
      release: async () => {
        this.singletons.delete(runner);
        await runner.release();
      },
    };
  }

  // --- lifecycle ----------------------------------------------------------------------------------

  /** Releases singletons, stops watches, revokes the lease (so the registration vanishes at once) and closes. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.singletons].map((s) => s.release().catch(() => undefined)));
    await Promise.all([...this.watches].map((w) => w.cancel()));
    await withTimeout(this.lease.stop(), 2000, () => new Error("revoke timed out")).catch(() => undefined);
    this.client.close();
  }

  private leaseChanged(change: LeaseChange): void {
    if (change.phase === "valid" && change.leaseId !== this.registeredLease && this.registration) {
      // A new lease after the old one was gone: everything under the old one vanished.
      this.putRegistration().catch((err) => this.backgroundError(err));
    }
    for (const runner of this.singletons) runner.leaseChanged();
  }

  private async watch(target: { key: string } | { prefix: string }, handlers: WatchHandlers): Promise<WatchHandle> {
    const starting = watchForever(this.client, target, handlers);
    const handle = await this.call("starting a watch", () => starting).catch((err) => {
      // Given up on (etcd unreachable): a watch that starts later anyway is cancelled, not leaked.
      starting.then((late) => late.cancel()).catch(() => undefined);
      throw err;
    });
    const tracked: WatchHandle = {
      cancel: async () => {
        this.watches.delete(tracked);
        await handle.cancel();
      },
    };
    this.watches.add(tracked);
    return tracked;
  }

  private leaseLost(): HermesError {
    return new HermesError("lease_lost", `etcd no longer holds the lease of gateway ${this.gatewayId}; a new one is being granted`);
  }

  /** One etcd round trip, bounded in time; failures other than a missing lease become `coordinator_unavailable`. */
  private async call<T>(what: string, work: () => Promise<T>): Promise<T> {
    if (this.closed) throw new HermesError("coordinator_unavailable", `the coordinator client of gateway ${this.gatewayId} is closed`);
    const timeoutMs = Math.max(1000, this.options.callTimeoutMs ?? 2000) * 2;
    try {
      return await withTimeout(work(), timeoutMs, () => new Error(`no answer within ${timeoutMs} ms`));
    } catch (err) {
      if (isLeaseGone(err) || err instanceof HermesError) throw err;
      throw unavailable(err, what, this.endpoints);
    }
  }

  private backgroundError(err: unknown): void {
    if (this.closed) return;
    this.options.onBackgroundError?.(err instanceof HermesError ? err : unavailable(err, "in the background", this.endpoints));
  }
}

function authorityRead(kv: IKeyValue | null): AuthorityRead {
  if (kv === null) return { text: null, modRevision: "0", record: null, problem: null };
  const text = kv.value.toString("utf8");
  const parsed = parseAuthorityRecord(text);
  return {
    text,
    modRevision: String(kv.mod_revision),
    record: parsed.ok ? parsed.record : null,
    problem: parsed.ok ? null : parsed.problem,
  };
}
