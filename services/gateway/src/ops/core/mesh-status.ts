/**
 * The mesh as one gateway sees it: the one data model behind `hermes status`, the console's Mesh
 * view and `hermes check`. The shell observes (this gateway, its registered peers, the relay's
 * roster, a coordinator when there is one) and `assembleMeshStatus` turns what it saw into the
 * picture: which gateways there are and whether they answer, and per room who leads it, at which
 * epoch, and how far behind each copy is.
 */

export interface Authority {
  gateway_id: string;
  epoch: number;
}

export interface MemberView {
  member_id: string;
  profile: string;
  gateway_id?: string | undefined;
}

/** One gateway's copy of a room, as that gateway reported it. */
export interface RoomCopy {
  room_id: string;
  name: string;
  role: string;
  /** The authority this copy knows. */
  authority: Authority;
  /** Events stored in this copy. */
  stored_seq: number;
  /** The authority's latest seq as this copy last heard it (a replica's last page), when known. */
  known_latest_seq?: number | null | undefined;
  safety_status: string;
  safety_reason: string | null;
  fenced_by: Authority | null;
  /** This gateway was demoted for the room (an audit record). */
  demoted: boolean;
  /** A replica's follower: following, reconnecting, stopped; null when none runs. */
  following?: string | null | undefined;
  members: MemberView[];
}

/** How the observing gateway knows of another: itself, a registered peer, the relay's roster, the coordinator. */
export type GatewayVia = "self" | "peer" | "relay" | "coordinator";

/** A bot as its gateway (or the relay) described it. */
export interface BotObservation {
  handle: string;
  display_name: string;
  title: string;
  description: string;
  /** Whether a turn of it runs now (known for this gateway's own bots only). */
  active: boolean | null;
}

/** What was seen of one gateway. */
export interface GatewayObservation {
  /** Its gateway id; for a peer that did not answer, the peer's name. */
  gateway_id: string;
  via: GatewayVia;
  /** The name it is registered under as a peer here (what `groups.replicate --from` takes), or null. */
  peer: string | null;
  /** Its gRPC URL, when known (the peer's registered URL, the coordinator's advertised one). */
  url: string | null;
  /** Its HTTP address (host:port), from its own status. */
  http_address: string | null;
  reachable: boolean;
  /** Why it could not be observed. */
  error: string | null;
  version: string | null;
  uptime_seconds: number | null;
  /** The state of its own relay link (connected, backoff, …; disabled without a relay). */
  relay_state: string | null;
  /** Its copies of rooms; null when they could not be read. */
  rooms: RoomCopy[] | null;
  /** Its bots; null when they could not be read. */
  bots: BotObservation[] | null;
}

export interface RelayView {
  url: string;
  connection: string;
  state: string;
  roster_epoch: number;
}

/** The coordinator as a gateway with one configured sees it (absent without one). */
export interface CoordinatorView {
  endpoints: string[];
  state: string;
  error?: string | null | undefined;
}

export interface MeshGateway extends Omit<GatewayObservation, "rooms" | "bots"> {
  /** The web console of that gateway (`http://<http_address>/`), when its address is known. */
  console_url: string | null;
  /** Rooms it leads (`room@epoch`). */
  leads: string[];
}

export interface MeshCopy {
  gateway_id: string;
  role: string;
  epoch: number;
  stored_seq: number;
  /** Events behind the room's latest seq; null when the latest is unknown. */
  lag: number | null;
  safety_status: string;
  safety_reason: string | null;
  fenced_by: Authority | null;
  demoted: boolean;
  following: string | null;
}

/** A room across the mesh, worst first: split_brain, quarantined, fenced, diverged, lagging, unknown, ok. */
export type RoomSafety = "ok" | "lagging" | "diverged" | "fenced" | "quarantined" | "split_brain" | "unknown";

export interface MeshRoom {
  room_id: string;
  name: string;
  /** Who leads it: the highest-epoch copy that is an unfenced authority, else the highest epoch any copy names. */
  authority: Authority;
  /** Whether the authority's own copy was observed. */
  authority_observed: boolean;
  /** The authority's latest seq (its own copy, else the newest any replica heard of); null when unknown. */
  latest_seq: number | null;
  safety: RoomSafety;
  /** Why, in words, when safety is not ok. */
  safety_detail: string | null;
  members: MemberView[];
  /** The authority's copy first, then the replicas by gateway id. */
  copies: MeshCopy[];
}

export interface MeshStatus {
  observed_at: string;
  /** The observing gateway. */
  self: string;
  /** This gateway first, then the others by id. */
  gateways: MeshGateway[];
  relay: RelayView | null;
  coordinator: CoordinatorView | null;
  rooms: MeshRoom[];
}

export interface MeshObservations {
  observed_at: string;
  self: GatewayObservation;
  /** Registered peers, relay roster gateways and coordinator registrations; the same gateway may appear more than once. */
  others: GatewayObservation[];
  relay: RelayView | null;
  coordinator: CoordinatorView | null;
}

const VIA_RANK: Record<GatewayVia, number> = { self: 0, peer: 1, coordinator: 2, relay: 3 };

/**
 * Several observations of one gateway (a peer that is also on the relay) become one: the most
 * direct one that answered wins, and it keeps what the others add (a URL, reachability via the relay).
 */
function mergeObservations(all: GatewayObservation[]): GatewayObservation[] {
  const byId = new Map<string, GatewayObservation[]>();
  for (const o of all) byId.set(o.gateway_id, [...(byId.get(o.gateway_id) ?? []), o]);
  return [...byId.values()].map((group) => {
    const sorted = [...group].sort((a, b) => Number(b.rooms !== null) - Number(a.rooms !== null) || VIA_RANK[a.via] - VIA_RANK[b.via]);
    const best = sorted[0]!;
    return {
      ...best,
      peer: best.peer ?? group.find((o) => o.peer)?.peer ?? null,
      url: best.url ?? group.find((o) => o.url)?.url ?? null,
      http_address: best.http_address ?? group.find((o) => o.http_address)?.http_address ?? null,
      reachable: group.some((o) => o.reachable),
      error: group.some((o) => o.reachable) ? null : best.error,
      bots: best.bots ?? group.find((o) => o.bots)?.bots ?? null,
    };
  });
}

function higher(a: Authority, b: Authority): boolean {
  return a.epoch > b.epoch || (a.epoch === b.epoch && a.gateway_id > b.gateway_id);
}

const SAFETY_ORDER: RoomSafety[] = ["split_brain", "quarantined", "fenced", "diverged", "lagging", "unknown", "ok"];

function worse(a: RoomSafety, b: RoomSafety): RoomSafety {
  return SAFETY_ORDER.indexOf(a) <= SAFETY_ORDER.indexOf(b) ? a : b;
}

/** One room from every observed copy of it. */
export function assembleRoom(copies: readonly (RoomCopy & { gateway_id: string })[]): MeshRoom {
  const first = copies[0]!;
  const leaders = copies.filter((c) => c.role === "authority" && !c.fenced_by && c.safety_status !== "fenced");
  let authority: Authority | undefined;
  for (const c of leaders) {
    const a = { gateway_id: c.gateway_id, epoch: c.authority.epoch };
    if (!authority || higher(a, authority)) authority = a;
  }
  if (!authority) {
    for (const c of copies) {
      for (const named of [c.authority, c.fenced_by]) if (named && (!authority || higher(named, authority))) authority = { ...named };
    }
  }
  const lead = authority!;
  const own = copies.find((c) => c.gateway_id === lead.gateway_id && c.role === "authority");
  const heard = copies.map((c) => c.known_latest_seq ?? 0).filter((n) => n > 0);
  const latest = own ? own.stored_seq : heard.length > 0 ? Math.max(...heard) : null;
  const meshCopies: MeshCopy[] = copies
    .map((c) => ({
      gateway_id: c.gateway_id,
      role: c.role,
      epoch: c.authority.epoch,
      stored_seq: c.stored_seq,
      lag: latest === null ? null : c === own ? 0 : Math.max(0, latest - c.stored_seq),
      safety_status: c.safety_status,
      safety_reason: c.safety_reason,
      fenced_by: c.fenced_by,
      demoted: c.demoted,
      following: c.following ?? null,
    }))
    .sort(
      (a, b) =>
        Number(b.gateway_id === lead.gateway_id && b.role === "authority") -
          Number(a.gateway_id === lead.gateway_id && a.role === "authority") || (a.gateway_id < b.gateway_id ? -1 : 1),
    );

  let safety: RoomSafety = "ok";
  const details: string[] = [];
  const flag = (s: RoomSafety, detail: string) => {
    safety = worse(safety, s);
    details.push(detail);
  };
  const distinctLeaders = new Set(leaders.map((c) => c.gateway_id));
  if (distinctLeaders.size > 1) flag("split_brain", `${[...distinctLeaders].sort().join(" and ")} both accept sends`);
  for (const c of meshCopies) {
    if (c.safety_status === "quarantined")
      flag("quarantined", `${c.gateway_id} quarantined it${c.safety_reason ? ` (${c.safety_reason})` : ""}`);
    else if (c.safety_status === "fenced")
      flag(
        "fenced",
        `${c.gateway_id} is fenced by ${c.fenced_by ? `${c.fenced_by.gateway_id}@${c.fenced_by.epoch}` : "a newer authority"}; demote it`,
      );
    else if (c.safety_status === "diverged") flag("diverged", `${c.gateway_id} preserved a divergent branch`);
  }
  const lagging = meshCopies.filter((c) => (c.lag ?? 0) > 0);
  if (lagging.length > 0) flag("lagging", lagging.map((c) => `${c.gateway_id} is ${c.lag} behind`).join(", "));
  if (latest === null) flag("unknown", `${lead.gateway_id} was not observed and no replica knows its latest seq`);
  return {
    room_id: first.room_id,
    name: (own ?? first).name,
    authority: lead,
    authority_observed: own !== undefined,
    latest_seq: latest,
    safety,
    safety_detail: details.length > 0 ? details.join("; ") : null,
    members: (own ?? first).members,
    copies: meshCopies,
  };
}

/** `http://host:port/` for an HTTP address; a wildcard bind is reached on the gRPC URL's host (or loopback). */
export function consoleUrl(httpAddress: string | null, grpcUrl: string | null): string | null {
  if (!httpAddress) return null;
  const match = /^(.*):(\d+)$/.exec(httpAddress);
  if (!match) return null;
  let host = match[1]!;
  if (host === "0.0.0.0" || host === "::" || host === "[::]") {
    const fromUrl = grpcUrl ? /^grpcs?:\/\/(\[[^\]]+\]|[^:/]+)/.exec(grpcUrl)?.[1] : undefined;
    host = fromUrl ?? "127.0.0.1";
  }
  if (host.includes(":") && !host.startsWith("[")) host = `[${host}]`;
  return `http://${host}:${match[2]}/`;
}

export function assembleMeshStatus(o: MeshObservations): MeshStatus {
  const merged = mergeObservations([o.self, ...o.others.filter((x) => x.gateway_id !== o.self.gateway_id)]);
  const copies = new Map<string, (RoomCopy & { gateway_id: string })[]>();
  for (const g of merged) {
    for (const r of g.rooms ?? []) copies.set(r.room_id, [...(copies.get(r.room_id) ?? []), { ...r, gateway_id: g.gateway_id }]);
  }
  const rooms = [...copies.values()].map(assembleRoom).sort((a, b) => (a.room_id < b.room_id ? -1 : 1));
  const gateways: MeshGateway[] = merged
    .map(({ rooms: _rooms, bots: _bots, ...g }) => ({
      ...g,
      console_url: consoleUrl(g.http_address, g.url),
      leads: rooms.filter((r) => r.authority.gateway_id === g.gateway_id).map((r) => `${r.room_id}@${r.authority.epoch}`),
    }))
    .sort((a, b) => Number(b.via === "self") - Number(a.via === "self") || (a.gateway_id < b.gateway_id ? -1 : 1));
  return { observed_at: o.observed_at, self: o.self.gateway_id, gateways, relay: o.relay, coordinator: o.coordinator, rooms };
}

/** A bot across the mesh: where it lives and whether it is there now. */
export interface MeshBot extends BotObservation {
  gateway_id: string;
  /** Hosted by the observing gateway (its Bot Chat is served here). */
  local: boolean;
  /** Its gateway answers (or the relay has it online). */
  online: boolean;
}

/** Every bot the observations name, once per gateway and handle, this gateway's first. */
export function meshBots(o: MeshObservations): MeshBot[] {
  const seen = new Set<string>();
  const out: MeshBot[] = [];
  const all = [o.self, ...[...o.others].sort((a, b) => VIA_RANK[a.via] - VIA_RANK[b.via])];
  for (const g of all) {
    if (g !== o.self && g.gateway_id === o.self.gateway_id) continue;
    for (const b of g.bots ?? []) {
      const key = `${g.gateway_id}\u0000${b.handle}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push({ ...b, gateway_id: g.gateway_id, local: g === o.self, online: g.reachable });
    }
  }
  return out.sort(
    (a, b) =>
      Number(b.local) - Number(a.local) ||
      (a.gateway_id < b.gateway_id ? -1 : a.gateway_id > b.gateway_id ? 1 : a.handle < b.handle ? -1 : 1),
  );
}
