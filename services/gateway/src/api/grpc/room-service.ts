import type { ServerDuplexStream, ServerWritableStream } from "@grpc/grpc-js";
import { HermesError, type ServiceHandlers, toServiceError, toWireError } from "@hermes/common";
import type {
  AppendReply,
  AppendRequest,
  AppendResult,
  DiscussionStatus,
  ReplicaStateReply,
  ReplicateRequest,
  Room,
  RoomServiceServer,
  SendReply,
  SendRequest,
  SubscribeRequest,
  DivergenceRecord as WireDivergence,
  LogPage as WireLogPage,
  Member as WireMember,
  ReplicateProgress as WireProgress,
} from "@hermes/proto/hermes/v1/rooms";
import type { ReplicaStateResult, RoomDriverStatus, RoomsService, RoomView } from "../../app/rooms/rooms-service.js";
import { optionalAuthority, toWireAnyPage, toWireEvent, toWirePackedPage, toWirePage } from "../../app/rooms/wire.js";
import type { Member, RoomEvent } from "../../core/rooms/index.js";
import { parseRoomParams, sourceSpecOf } from "../room-params.js";

/** Bound on sends of one Append stream waiting for their commit; reading pauses above it. */
const MAX_IN_FLIGHT_PER_STREAM = 20_000;

function toWireMember(m: Member): WireMember {
  return { member_id: m.member_id, profile: m.profile, gateway_id: m.gateway_id, display_name: m.display_name };
}

function fromWireMember(m: WireMember): Record<string, string> {
  const member: Record<string, string> = { member_id: m.member_id, profile: m.profile };
  if (m.gateway_id !== undefined) member.gateway_id = m.gateway_id;
  if (m.display_name !== undefined) member.display_name = m.display_name;
  return member;
}

export function toWireRoom(v: RoomView): Room {
  return {
    room_id: v.room_id,
    name: v.name,
    members: v.members.map(toWireMember),
    authority_gateway_id: v.authority_gateway_id,
    authority_epoch: v.authority_epoch,
    latest_seq: v.latest_seq,
    revision: v.revision,
    created_at: v.created_at,
    updated_at: v.updated_at,
    disbanded_at: v.disbanded_at ?? undefined,
    role: v.role,
    safety_status: v.safety_status,
    safety_reason: v.safety_reason ?? undefined,
    fenced_by: v.fenced_by ?? undefined,
    demoted: v.demoted ?? undefined,
  };
}

function toWireReplicaState(s: ReplicaStateResult): ReplicaStateReply {
  return {
    ...s,
    safety_reason: s.safety_reason ?? undefined,
    following: s.following ? { ...s.following, last_error: s.following.last_error ?? undefined } : undefined,
    demoted: s.demoted ?? undefined,
  };
}

/** The discussion of groups.state for the wire; unset optionals left out. */
function toWireDiscussion(d: RoomDriverStatus["discussion"]): DiscussionStatus | undefined {
  if (!d) return undefined;
  return {
    state: d.state,
    reason: d.reason,
    discussion_seq: d.discussion_seq,
    round_index: d.round_index,
    replies: d.replies,
    turn_id: d.turn?.turn_id,
    turn_member_id: d.turn?.member_id,
    unavailable: d.unavailable,
  };
}

function toWireSend(r: { event: RoomEvent; accepted: boolean; idempotent: boolean }): SendReply {
  return { event: toWireEvent(r.event), accepted: r.accepted, idempotent: r.idempotent };
}

function toWireDivergence(d: {
  divergence_id: number;
  room_id: string;
  detected_at: string;
  from_seq: number;
  branch_epoch: number;
  branch_gateway_id: string;
  winning_epoch: number;
  winning_gateway_id: string;
  count: number;
  markers_only: boolean;
  events?: RoomEvent[];
}): WireDivergence {
  return {
    divergence_id: d.divergence_id,
    room_id: d.room_id,
    detected_at: d.detected_at,
    from_seq: d.from_seq,
    branch_epoch: d.branch_epoch,
    branch_gateway_id: d.branch_gateway_id,
    winning_epoch: d.winning_epoch,
    winning_gateway_id: d.winning_gateway_id,
    count: d.count,
    markers_only: d.markers_only,
    events: (d.events ?? []).map(toWireEvent),
  };
}

/** A send request from the wire, in the JSON shape the core validates (unset optional fields left out). */
function sendParams(send: SendRequest | undefined): unknown {
  if (!send) return {};
  const params: Record<string, unknown> = { room_id: send.room_id, event_id: send.event_id };
  if (send.payload) {
    params.payload =
      send.payload.thread_id === undefined ? { text: send.payload.text } : { text: send.payload.text, thread_id: send.payload.thread_id };
  }
  if (send.expected_latest_seq !== undefined) params.expected_latest_seq = send.expected_latest_seq;
  return params;
}

function streamError(call: { emit(event: string, err: unknown): boolean }, err: unknown): void {
  call.emit("error", toServiceError(err));
}

/** RoomService over gRPC: a thin adapter over RoomsService (auth, status mapping and metrics by adaptService). */
export function roomServiceHandlers(rooms: RoomsService): ServiceHandlers<RoomServiceServer> {
  return {
    capabilities: () => rooms.capabilities(),
    create: (req) => {
      const p = parseRoomParams("create", { room_id: req.room_id, name: req.name, members: req.members.map(fromWireMember) });
      return { room: toWireRoom(rooms.create(p)) };
    },
    send: async (req) => toWireSend(await rooms.send(sendParams(req))),
    append: ((call: ServerDuplexStream<AppendRequest, AppendReply>) => {
      // Results are written in batches too: a write is in flight at most once, and whatever
      // completes meanwhile goes into the next message.
      let inFlight = 0;
      let ended = false;
      let paused = false;
      let closed = false;
      let writing = false;
      let results: AppendResult[] = [];
      const flushResults = () => {
        if (writing || closed || results.length === 0) return maybeEnd();
        const batch = results;
        results = [];
        writing = true;
        call.write({ results: batch }, () => {
          writing = false;
          flushResults();
        });
      };
      const maybeEnd = () => {
        if (ended && inFlight === 0 && results.length === 0 && !writing && !closed) {
          closed = true;
          call.end();
        }
      };
      const answer = (result: AppendResult) => {
        inFlight--;
        results.push(result);
        if (paused && inFlight < MAX_IN_FLIGHT_PER_STREAM / 2 && !closed) {
          paused = false;
          call.resume();
        }
        if (results.length === 1) setImmediate(flushResults);
      };
      call.on("data", (req: AppendRequest) => {
        for (const item of req.sends) {
          inFlight++;
          rooms.send(sendParams(item.send)).then(
            (ok) => {
              const e = ok.event;
              answer({
                tag: item.tag,
                ok: { seq: e.seq, epoch: e.epoch, hash: e.hash, created_at: e.created_at, idempotent: ok.idempotent },
                error: undefined,
              });
            },
            (err: unknown) => answer({ tag: item.tag, ok: undefined, error: toWireError(err) }),
          );
        }
        if (inFlight >= MAX_IN_FLIGHT_PER_STREAM && !paused) {
          paused = true;
          call.pause();
        }
      });
      call.on("end", () => {
        ended = true;
        maybeEnd();
      });
      call.on("error", () => {
        closed = true;
      });
      call.on("cancelled", () => {
        closed = true;
      });
    }) as unknown as ServiceHandlers<RoomServiceServer>["append"],
    log: (req) => {
      const p = parseRoomParams("log", {
        room_id: req.room_id,
        since_seq: req.since_seq,
        limit: req.limit,
        max_bytes: req.max_bytes,
        packed: req.packed,
      });
      const params = { ...p, known_authority: optionalAuthority(req.known_authority) };
      return req.packed ? toWirePackedPage(rooms.logPacked(params)) : toWirePage(rooms.log(params), false);
    },
    subscribe: ((call: ServerWritableStream<SubscribeRequest, WireLogPage>) => {
      const req = call.request;
      try {
        const p = parseRoomParams("subscribe", { room_id: req.room_id, since_seq: req.since_seq });
        const subscription = rooms.subscribe(
          {
            room_id: p.room_id,
            since_seq: p.since_seq ?? 0,
            packed: req.packed,
            tuples: req.packed,
            known_authority: optionalAuthority(req.known_authority),
          },
          {
            send: (page) => call.write(toWireAnyPage(page)),
            drained: () =>
              new Promise<void>((resolve) => {
                call.once("drain", resolve);
                call.once("close", resolve);
              }),
            end: (error) => (error ? streamError(call, error) : call.end()),
          },
        );
        const close = () => subscription.close();
        call.on("cancelled", close);
        call.on("close", close);
        call.on("error", close);
      } catch (err) {
        streamError(call, err);
      }
    }) as unknown as ServiceHandlers<RoomServiceServer>["subscribe"],
    replicate: ((call: ServerWritableStream<ReplicateRequest, WireProgress>) => {
      const req = call.request;
      const controller = new AbortController();
      call.on("cancelled", () => controller.abort());
      const run = async () => {
        const from = req.from;
        const url = from?.url ?? "";
        const peer = from?.peer ?? "";
        if ((url === "") === (peer === "")) {
          throw new HermesError("invalid_params", "from: give either url (with key) or the name of a registered peer", {
            data: { field: "from" },
          });
        }
        const p = parseRoomParams("replicate", {
          room_id: req.room_id,
          from: url !== "" ? { url, key: from?.key || undefined } : peer,
          follow: req.follow,
        });
        const result = await rooms.replicate(
          { room_id: p.room_id, from: sourceSpecOf(p.from), follow: p.follow ?? false },
          (progress) => {
            if (!call.cancelled) call.write({ ...progress, result: undefined });
          },
          controller.signal,
        );
        if (call.cancelled) return;
        call.write({
          stored_seq: result.stored_seq,
          latest_seq: rooms.replicaState(p.room_id).latest_seq,
          ingested: result.ingested,
          result: { ...result, divergences: result.divergences.map(toWireDivergence) },
        });
        call.end();
      };
      run().catch((err: unknown) => {
        if (!call.cancelled) streamError(call, err);
      });
    }) as unknown as ServiceHandlers<RoomServiceServer>["replicate"],
    replicaState: (req) => toWireReplicaState(rooms.replicaState(parseRoomParams("room", req).room_id)),
    promote: (req) => rooms.promote(parseRoomParams("promote", req)),
    demote: (req) => rooms.demote(parseRoomParams("demote", req)),
    state: (req) => {
      const s = rooms.state(parseRoomParams("state", req).room_id);
      return {
        room: toWireRoom(s.room),
        driver_status: s.driver_status,
        needs_you: s.needs_you,
        discussion: toWireDiscussion(s.discussion),
      };
    },
    stop: (req) => rooms.stopRoom(parseRoomParams("room", req).room_id),
    rename: async (req) => {
      const p = parseRoomParams("rename", { room_id: req.room_id, name: req.name, event_id: req.event_id || undefined });
      return { room: toWireRoom(await rooms.rename(p)) };
    },
    disband: async (req) => {
      const r = await rooms.disband(parseRoomParams("room", req).room_id);
      return { room_id: r.room_id, event: toWireEvent(r.event), idempotent: r.idempotent };
    },
    list: (req) => {
      const p = parseRoomParams("list", req);
      const r = rooms.list(p);
      return { rooms: r.rooms.map(toWireRoom), next_offset: r.next_offset ?? undefined };
    },
    divergence: (req) => {
      const r = rooms.divergence(parseRoomParams("room", req).room_id);
      return { room_id: r.room_id, branches: r.branches.map(toWireDivergence) };
    },
    repost: async (req) => {
      const p = parseRoomParams("repost", {
        room_id: req.room_id,
        seqs: req.seqs,
        divergence_id: req.divergence_id,
        messages: req.messages.map((m) => (m.thread_id === undefined ? { event_id: m.event_id, text: m.text, origin: m.origin } : m)),
      });
      const r = await rooms.repost(p);
      return { room_id: r.room_id, items: r.items.map((i) => ({ ...i, event: toWireEvent(i.event) })) };
    },
    releaseSafety: (req) => toWireReplicaState(rooms.release(parseRoomParams("room", req).room_id)),
  };
}
