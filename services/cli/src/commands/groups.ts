import { writeFileSync } from "node:fs";
import { resolve } from "node:path";
import type { ServiceError } from "@grpc/grpc-js";
import { fromServiceError, HermesError } from "@hermes/common/client";
import { demoteCommand, promoteChecklist, promoteCoverageRefusal } from "@hermes/gateway/ops";
import {
  type DemotionRecord,
  type DiscussionStatus,
  type DivergenceRecord,
  type LogPage,
  type ReplicaStateReply,
  type ReplicateProgress,
  type ReplicationState,
  type Room,
  type RoomEvent,
  RoomServiceClient,
} from "@hermes/proto/hermes/v1/rooms";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import type { CommandRunner } from "../main.js";
import { emit, table, warn } from "../output.js";

/**
 * `hermes groups …`: rooms and the operator runbook of docs/OPERATIONS.md (promote, demote,
 * divergence). Every command prints a readable summary, or the RPC's result with --json. Exit
 * codes: 0 ok, 1 runtime/transport failure, 2 usage error or refusal (the refusal's reason decides,
 * see @hermes/common REASONS).
 */

/** An event as the CLI shows it in JSON: actor and payload parsed. */
function eventJson(e: RoomEvent) {
  return {
    room_id: e.room_id,
    seq: e.seq,
    event_id: e.event_id,
    kind: e.kind,
    actor: JSON.parse(e.actor_json) as unknown,
    epoch: e.epoch,
    payload: JSON.parse(e.payload_json) as unknown,
    created_at: e.created_at,
    hash: e.hash,
  };
}

function roomJson(r: Room | undefined) {
  if (!r) return null;
  return {
    ...r,
    disbanded_at: r.disbanded_at ?? null,
    safety_reason: r.safety_reason ?? null,
    fenced_by: r.fenced_by ?? null,
    demoted: r.demoted ?? null,
  };
}

function divergenceJson(d: DivergenceRecord) {
  return { ...d, events: d.events.map(eventJson) };
}

function replicaStateJson(s: ReplicaStateReply) {
  return {
    ...s,
    safety_reason: s.safety_reason ?? null,
    following: s.following ? { ...s.following, last_error: s.following.last_error ?? null } : null,
    demoted: s.demoted ?? null,
  };
}

/** The audit record of a demotion, for humans. */
function demotionLine(d: DemotionRecord): string {
  return `${d.previous_gateway_id}@${d.previous_epoch} → ${d.authority_gateway_id}@${d.authority_epoch} at ${d.demoted_at} (its log ended at seq ${d.last_seq})`;
}

/** One line of an event for humans: seq, epoch, kind, who, what. */
function eventLine(e: RoomEvent): string[] {
  const actor = JSON.parse(e.actor_json) as { id?: string; display_name?: string };
  const payload = JSON.parse(e.payload_json) as Record<string, unknown>;
  const what =
    typeof payload.text === "string" ? payload.text : typeof payload.name === "string" ? `name: ${payload.name}` : e.payload_json;
  return [String(e.seq), String(e.epoch), e.kind, actor.display_name ?? actor.id ?? "?", what.replace(/\s+/g, " ").slice(0, 100)];
}

function describeRoom(r: Room): string {
  const rows: (string | number)[][] = [
    ["room", r.room_id],
    ["name", r.name],
    ["members", r.members.map((m) => (m.gateway_id ? `${m.profile}@${m.gateway_id}` : m.profile)).join(", ")],
    ["authority", `${r.authority_gateway_id}@${r.authority_epoch}`],
    ["role here", r.role],
    ["latest seq", r.latest_seq],
    ["revision", r.revision],
    ["safety", r.safety_reason ? `${r.safety_status} (${r.safety_reason})` : r.safety_status],
  ];
  if (r.fenced_by) rows.push(["fenced by", `${r.fenced_by.gateway_id}@${r.fenced_by.epoch}`]);
  if (r.demoted) rows.push(["demoted here", demotionLine(r.demoted)]);
  if (r.disbanded_at) rows.push(["disbanded", r.disbanded_at]);
  rows.push(["created", r.created_at], ["updated", r.updated_at]);
  return table(["FIELD", "VALUE"], rows);
}

function replicationJson(r: ReplicationState | undefined) {
  if (!r) return null;
  return { ...r, lease: r.lease ?? null };
}

function describeReplication(r: ReplicationState | undefined): string | null {
  if (r?.mode !== "quorum") return null;
  const rows: (string | number)[][] = [
    ["mode", `quorum, min_insync ${r.min_insync}`],
    ["replicas", r.replicas.join(", ")],
    ["in sync", r.isr.join(", ") || "unknown (the record cannot be read)"],
  ];
  if (r.missing.length > 0) rows.push(["missing", `${r.missing.join(", ")} (not registered in the mesh)`]);
  rows.push([
    "lease",
    r.lease ? `held by ${r.lease.holder}, expires in ${r.lease.expires_in_ms} ms` : "none alive: an in-sync replica takes over",
  ]);
  return table(["REPLICATION", "VALUE"], rows);
}

function describeDiscussion(driver: string, needsYou: boolean, d: DiscussionStatus | undefined): string {
  const rows: (string | number)[][] = [["driver", driver]];
  if (needsYou) rows.push(["needs you", "yes: a member wrote @user"]);
  if (d) {
    rows.push(["discussion", d.reason ? `${d.state} (${d.reason})` : d.state]);
    if (d.discussion_seq !== undefined)
      rows.push(["of message", `seq ${d.discussion_seq}, round ${(d.round_index ?? 0) + 1}, ${d.replies} replies`]);
    if (d.turn_id) rows.push(["turn", `${d.turn_member_id ?? "?"} (${d.turn_id})`]);
    for (const u of d.unavailable) rows.push(["unavailable", `${u.member_id}: ${u.why}`]);
  }
  return table(["DISCUSSION", "VALUE"], rows);
}

function describeReplicaState(s: ReplicaStateReply): string {
  const rows: (string | number)[][] = [
    ["room", s.room_id],
    ["role here", s.role],
    ["authority", s.authority ? `${s.authority.gateway_id}@${s.authority.epoch}` : "-"],
    ["stored seq", s.last_seq],
    ["authority's latest", s.latest_seq],
    ["caught up", s.caught_up ? "yes (as of the last page)" : "no"],
    ["safety", s.safety_reason ? `${s.safety_status} (${s.safety_reason})` : s.safety_status],
  ];
  if (s.following)
    rows.push([
      "following",
      `${s.following.state} from ${s.following.source}${s.following.last_error ? ` (${s.following.last_error})` : ""}`,
    ]);
  if (s.demoted) rows.push(["demoted here", demotionLine(s.demoted)]);
  return table(["FIELD", "VALUE"], rows);
}

/** `alice,bob@gw-2` → members; a member on another gateway is `profile@gateway`. */
function parseMembers(value: string): { member_id: string; profile: string; gateway_id?: string }[] {
  return value
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((spec) => {
      const at = spec.indexOf("@");
      if (at < 0) return { member_id: spec, profile: spec };
      return { member_id: spec, profile: spec.slice(0, at), gateway_id: spec.slice(at + 1) };
    });
}

function wholeNumber(value: string | undefined, flag: string, min = 0): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < min) throw new HermesError("invalid_params", `${flag} must be a whole number ≥ ${min}, got ${value}`);
  return n;
}

/** The gateway's refusal of an oversized text names the API field; on the command line it is the message. */
function messageTooLong(err: unknown): unknown {
  if (!(err instanceof HermesError) || err.reason !== "payload_too_large" || err.data.field !== "payload.text") return err;
  const { actual, limit } = err.data;
  return new HermesError(
    "payload_too_large",
    `the message is ${String(actual)} bytes of UTF-8; a room message holds at most ${String(limit)} (64 KiB). Split it into several messages.`,
    { data: err.data },
  );
}

function newEventId(): string {
  return `cli-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}

/** Collects a server stream; rejects with the typed error. */
function collect<T>(stream: NodeJS.EventEmitter & { cancel(): void }, onData: (message: T) => void): Promise<void> {
  return new Promise((resolveDone, reject) => {
    stream.on("data", onData);
    stream.on("error", (err: ServiceError) => reject(fromServiceError(err)));
    stream.on("end", () => resolveDone());
  });
}

async function replicaState(ctx: CliContext, client: RoomServiceClient, roomId: string): Promise<ReplicaStateReply> {
  return ctx.call(client, client.replicaState, { room_id: roomId });
}

export function registerGroupsCommands(program: Command, run: CommandRunner): void {
  const groups = program.command("groups").description("replicated rooms: create, send, log, replicate, promote, demote, divergence");
  const rooms = (ctx: CliContext) => ctx.client(RoomServiceClient);

  groups
    .command("list")
    .description("rooms on this gateway (led here or replicated), most recently updated first")
    .option("--include-disbanded", "also list disbanded rooms")
    .option("--limit <n>", "at most this many (1-500, default 500)")
    .option("--offset <n>", "skip this many")
    .action(
      run(async (ctx, o: { includeDisbanded?: boolean; limit?: string; offset?: string }) => {
        const c = rooms(ctx);
        const r = await ctx.call(c, c.list, {
          limit: wholeNumber(o.limit, "--limit", 1),
          offset: wholeNumber(o.offset, "--offset") ?? 0,
          include_disbanded: o.includeDisbanded === true,
        });
        emit(ctx.json, { rooms: r.rooms.map(roomJson), next_offset: r.next_offset ?? null }, () =>
          r.rooms.length === 0
            ? "no rooms (create one: hermes groups create --name NAME --members alice,bob)"
            : table(
                ["ROOM", "NAME", "AUTHORITY", "ROLE", "SEQ", "SAFETY", "UPDATED"],
                r.rooms.map((x) => [
                  x.room_id,
                  x.name,
                  `${x.authority_gateway_id}@${x.authority_epoch}`,
                  x.role,
                  x.latest_seq,
                  x.disbanded_at ? "disbanded" : x.safety_status,
                  x.updated_at,
                ]),
              ),
        );
      }),
    );

  groups
    .command("create")
    .description("create a room led by this gateway")
    .requiredOption("--name <name>", "room name (1-200 characters)")
    .requiredOption("--members <list>", "2-6 members: profile names, comma-separated; profile@gateway for a bot on another gateway")
    .option("--id <room-id>", "room id (default: generated)")
    .option("--replicas <list>", "quorum replication (needs a coordinator): the other gateways that hold the room, comma-separated")
    .option("--min-insync <n>", "with --replicas: replicas (this gateway included) that must be in sync for sends (default a majority)")
    .action(
      run(async (ctx, o: { name: string; members: string; id?: string; replicas?: string; minInsync?: string }) => {
        const c = rooms(ctx);
        if (o.minInsync !== undefined && o.replicas === undefined) throw new HermesError("invalid_params", "--min-insync needs --replicas");
        const replicas = o.replicas
          ?.split(",")
          .map((r) => r.trim())
          .filter((r) => r.length > 0);
        const r = await ctx.call(c, c.create, {
          room_id: o.id,
          name: o.name,
          members: parseMembers(o.members),
          ...(replicas ? { replication: { mode: "quorum", replicas, min_insync: wholeNumber(o.minInsync, "--min-insync", 1) ?? 0 } } : {}),
        });
        emit(
          ctx.json,
          { room: roomJson(r.room) },
          () => `created room ${r.room!.room_id} (authority ${r.room!.authority_gateway_id}@1)\n${describeRoom(r.room!)}`,
        );
      }),
    );

  groups
    .command("send <room> <text>")
    .description("send a message to a room (acknowledged once durable on the authority)")
    .option("--event-id <id>", "idempotency key: sending the same id and text again does not send twice (default: generated)")
    .option("--thread <id>", "thread id")
    .option("--expect-seq <n>", "refuse unless the room's log ends at this seq (optimistic concurrency)")
    .action(
      run(async (ctx, roomId: string, text: string, o: { eventId?: string; thread?: string; expectSeq?: string }) => {
        if (text === "") {
          throw new HermesError(
            "invalid_params",
            `the message is empty; give the text to send, e.g. hermes groups send ${roomId} "hello @all"`,
          );
        }
        const c = rooms(ctx);
        const r = await ctx
          .call(c, c.send, {
            room_id: roomId,
            event_id: o.eventId ?? newEventId(),
            payload: { text, ...(o.thread ? { thread_id: o.thread } : {}) },
            expected_latest_seq: wholeNumber(o.expectSeq, "--expect-seq"),
          })
          .catch((err: unknown) => {
            throw messageTooLong(err);
          });
        emit(ctx.json, { event: eventJson(r.event!), accepted: r.accepted, idempotent: r.idempotent }, () =>
          r.idempotent
            ? `already sent: seq ${r.event!.seq} (event ${r.event!.event_id})`
            : `sent: seq ${r.event!.seq} (event ${r.event!.event_id})`,
        );
      }),
    );

  groups
    .command("log <room>")
    .description("the room's events after --since (with --follow: keep printing new ones until Ctrl-C)")
    .option("--since <seq>", "start after this seq (default 0)")
    .option("--limit <n>", "events per page (1-500, default 100)")
    .option("--follow", "keep streaming new events (live tail)")
    .action(
      run(async (ctx, roomId: string, o: { since?: string; limit?: string; follow?: boolean }) => {
        const c = rooms(ctx);
        const since = wholeNumber(o.since, "--since") ?? 0;
        if (o.follow) {
          const stream = c.subscribe({ room_id: roomId, since_seq: since, packed: false, known_authority: undefined }, ctx.metadata());
          process.once("SIGINT", () => stream.cancel());
          await collect<LogPage>(stream, (page) => {
            for (const e of page.events)
              process.stdout.write(ctx.json ? `${JSON.stringify(eventJson(e))}\n` : `${eventLine(e).join("  ")}\n`);
          }).catch((err: HermesError) => {
            if (err.reason !== "timeout" && !/cancel/i.test(err.message)) throw err;
          });
          return;
        }
        const page = await ctx.call(c, c.log, {
          room_id: roomId,
          since_seq: since,
          limit: wholeNumber(o.limit, "--limit", 1),
          packed: false,
          known_authority: undefined,
        });
        emit(
          ctx.json,
          { ...page, events: page.events.map(eventJson), packed_events: undefined, prev: page.prev ?? null },
          () =>
            `${table(["SEQ", "EPOCH", "KIND", "FROM", "TEXT"], page.events.map(eventLine))}\n${page.has_more ? `more after seq ${page.cursor}: hermes groups log ${roomId} --since ${page.cursor}` : `latest seq ${page.latest_seq}`}`,
        );
      }),
    );

  groups
    .command("state <room>")
    .description("the room as this gateway holds it: authority, epoch, latest seq, safety")
    .action(
      run(async (ctx, roomId: string) => {
        const c = rooms(ctx);
        const r = await ctx.call(c, c.state, { room_id: roomId, include_disbanded: true });
        emit(
          ctx.json,
          {
            room: roomJson(r.room),
            driver_status: r.driver_status,
            needs_you: r.needs_you,
            discussion: r.discussion ?? null,
            replication: replicationJson(r.replication),
          },
          () =>
            [describeRoom(r.room!), describeReplication(r.replication), describeDiscussion(r.driver_status, r.needs_you, r.discussion)]
              .filter((part): part is string => part !== null)
              .join("\n"),
        );
      }),
    );

  groups
    .command("rename <room> <name>")
    .description("rename a room (on its authority)")
    .option("--event-id <id>", "idempotency key of the rename")
    .action(
      run(async (ctx, roomId: string, name: string, o: { eventId?: string }) => {
        const c = rooms(ctx);
        const r = await ctx.call(c, c.rename, { room_id: roomId, name, event_id: o.eventId });
        emit(ctx.json, { room: roomJson(r.room) }, () => `renamed ${roomId} to ${JSON.stringify(r.room!.name)}`);
      }),
    );

  groups
    .command("stop <room>")
    .description("stop what runs for the room on this gateway (a replica stops following)")
    .action(
      run(async (ctx, roomId: string) => {
        const c = rooms(ctx);
        const r = await ctx.call(c, c.stop, { room_id: roomId });
        emit(ctx.json, r, () => (r.following_stopped ? `stopped following ${roomId}` : `nothing was running for ${roomId}`));
      }),
    );

  groups
    .command("disband <room>")
    .description("close the room's log for good (on its authority); its id is retired and cannot be reused")
    .action(
      run(async (ctx, roomId: string) => {
        const c = rooms(ctx);
        const r = await ctx.call(c, c.disband, { room_id: roomId });
        emit(ctx.json, { room_id: r.room_id, event: eventJson(r.event!), idempotent: r.idempotent }, () =>
          r.idempotent
            ? `${roomId} was already disbanded (seq ${r.event!.seq})`
            : `disbanded ${roomId} at seq ${r.event!.seq}; the id is retired`,
        );
      }),
    );

  groups
    .command("capabilities")
    .description("protocol version, methods and limits of this gateway's rooms")
    .action(
      run(async (ctx) => {
        const c = rooms(ctx);
        const r = await ctx.call(c, c.capabilities, {});
        emit(ctx.json, r, () =>
          table(
            ["FIELD", "VALUE"],
            [
              ["gateway", r.gateway_id],
              ["protocol", r.protocol_version],
              ["driver", r.driver ? "running" : "none"],
              ["max log limit", r.max_log_limit],
              ["methods", r.methods.join(", ")],
              ["features", r.features.join(", ")],
            ],
          ),
        );
      }),
    );

  groups
    .command("replicate <room>")
    .description("pull a room from its authority onto this gateway (progress bar); --follow keeps tailing in the background")
    .requiredOption("--from <url|peer>", "the authority: a gRPC URL (grpc://host:7440) or a registered peer name")
    .option("--from-key <key>", "API key of the authority when --from is a URL")
    .option("--follow", "keep the replica tailing the authority (reconnects with back-off) after catching up")
    .action(
      run(async (ctx, roomId: string, o: { from: string; fromKey?: string; follow?: boolean }) => {
        const c = rooms(ctx);
        const isUrl = /^grpcs?:\/\//.test(o.from);
        const stream = c.replicate(
          {
            room_id: roomId,
            from: isUrl ? { url: o.from, key: o.fromKey ?? "", peer: "" } : { url: "", key: "", peer: o.from },
            follow: o.follow === true,
          },
          ctx.metadata(),
        );
        const showBar = !ctx.json && process.stderr.isTTY === true;
        const bar = showBar
          ? new (await import("cli-progress")).SingleBar({
              format: "replicating {bar} {value}/{total} events",
              stream: process.stderr,
              hideCursor: true,
            })
          : undefined;
        let started = false;
        let last: ReplicateProgress | undefined;
        process.once("SIGINT", () => stream.cancel());
        try {
          await collect<ReplicateProgress>(stream, (p) => {
            last = p;
            if (!bar) return;
            if (!started) {
              bar.start(Math.max(p.latest_seq, p.stored_seq), p.stored_seq);
              started = true;
            }
            bar.setTotal(Math.max(p.latest_seq, p.stored_seq));
            bar.update(p.stored_seq);
          });
        } finally {
          if (started) bar?.stop();
        }
        const result = last?.result;
        if (!result) throw new HermesError("unavailable", "the gateway ended replication without a result; see its log");
        const json = { ...result, divergences: result.divergences.map((d) => ({ ...d, events: undefined })) };
        emit(ctx.json, json, () => {
          const lines = [
            `${roomId}: stored up to seq ${result.stored_seq} (${result.ingested} new), authority ${result.authority?.gateway_id}@${result.authority?.epoch}, ${result.caught_up ? "caught up" : "NOT caught up"}`,
          ];
          for (const d of result.divergences) {
            lines.push(
              d.markers_only
                ? `handover marker at seq ${d.from_seq} preserved (branch ${d.branch_gateway_id}@${d.branch_epoch}); nothing else was off the winning lineage`
                : `DIVERGED: ${d.count} event(s) from seq ${d.from_seq} of ${d.branch_gateway_id}@${d.branch_epoch} were preserved; see hermes groups divergence ${roomId}`,
            );
          }
          if (result.following)
            lines.push(`following: the gateway keeps tailing ${o.from}; check with hermes groups replica-state ${roomId}`);
          return lines.join("\n");
        });
      }),
    );

  groups
    .command("replica-state <room>")
    .description("stored seq, the authority's latest seq, caught up, safety status (quarantined/diverged/fenced) and following")
    .action(
      run(async (ctx, roomId: string) => {
        const c = rooms(ctx);
        const s = await replicaState(ctx, c, roomId);
        emit(ctx.json, replicaStateJson(s), () => describeReplicaState(s));
      }),
    );

  groups
    .command("promote <room>")
    .description(
      "make this gateway the room's authority (a planned move, or recovery when the authority is gone); refused unless caught up",
    )
    .option("--confirm", "assert that the previous authority cannot commit (it is stopped and fenced)")
    .option("--reason <text>", "recorded in authority.claimed (default authority-unreachable)")
    .option("--allow-incomplete", "promote even though this replica is not caught up (history that never arrived is lost to this lineage)")
    .option("--unclean", "quorum rooms: claim although this gateway is not in the in-sync replicas (acknowledged sends it lacks are lost)")
    .action(
      run(async (ctx, roomId: string, o: { confirm?: boolean; reason?: string; allowIncomplete?: boolean; unclean?: boolean }) => {
        const c = rooms(ctx);
        const [s, caps] = await Promise.all([replicaState(ctx, c, roomId), ctx.call(c, c.capabilities, {})]);
        const checklist = promoteChecklist(caps.gateway_id, s, o.unclean === true);
        if (!ctx.json) process.stderr.write(`${checklist.join("\n")}\n`);
        const refusal = promoteCoverageRefusal(s, o.allowIncomplete === true);
        if (refusal) throw refusal;
        const r = await ctx.call(c, c.promote, {
          room_id: roomId,
          confirm: o.confirm === true,
          reason: o.reason,
          ...(o.unclean ? { unclean: true } : {}),
        });
        emit(ctx.json, { ...r, checklist }, () =>
          [
            `promoted: ${r.authority_gateway_id} leads ${roomId} at epoch ${r.authority_epoch} (was ${r.previous_gateway_id}@${r.previous_epoch}); authority.claimed at seq ${r.claim_seq}`,
            `next, on ${r.previous_gateway_id}: ${demoteCommand(roomId, { gateway_id: r.authority_gateway_id, epoch: r.authority_epoch })}`,
          ].join("\n"),
        );
      }),
    );

  groups
    .command("demote <room>")
    .description(
      "on the old authority: follow the new authority and record the demotion (both options required, except for a quorum room on a coordinated gateway: it hands the room to an in-sync replica)",
    )
    .option("--observed-gateway <id>", "the gateway that now leads the room (from its promote result)")
    .option("--observed-epoch <n>", "its epoch (from its promote result; never guess)")
    .action(
      run(async (ctx, roomId: string, o: { observedGateway?: string; observedEpoch?: string }) => {
        const c = rooms(ctx);
        const r = await ctx.call(c, c.demote, {
          room_id: roomId,
          observed_gateway_id: o.observedGateway ?? "",
          observed_epoch: wholeNumber(o.observedEpoch, "--observed-epoch", 1) ?? 0,
        });
        emit(ctx.json, r, () =>
          [
            r.idempotent
              ? `${roomId} already follows ${r.authority_gateway_id}@${r.authority_epoch}`
              : `demoted: ${roomId} now follows ${r.authority_gateway_id}@${r.authority_epoch} (recorded beside the log: hermes groups replica-state ${roomId})`,
            `next: hermes groups replicate ${roomId} --from <url or peer of ${r.authority_gateway_id}> --follow`,
          ].join("\n"),
        );
      }),
    );

  groups
    .command("divergence <room>")
    .description("preserved divergent branches (split brain); --export writes them to a file, --repost re-appends messages")
    .option("--export <file>", "write the branches (records and events) as JSON to this file")
    .option("--repost <seq...>", "re-append these preserved messages to the winning lineage as new messages by the operator")
    .option("--divergence-id <n>", "which branch --repost reads (when a seq is in several)")
    .action(
      run(async (ctx, roomId: string, o: { export?: string; repost?: string[]; divergenceId?: string }) => {
        const c = rooms(ctx);
        if (o.repost && o.repost.length > 0) {
          const seqs = o.repost.map((s) => wholeNumber(s, "--repost", 1)!);
          const r = await ctx.call(c, c.repost, {
            room_id: roomId,
            seqs,
            divergence_id: wholeNumber(o.divergenceId, "--divergence-id", 1),
            messages: [],
          });
          emit(ctx.json, { room_id: r.room_id, items: r.items.map((i) => ({ ...i, event: i.event ? eventJson(i.event) : null })) }, () =>
            r.items
              .map(
                (i) =>
                  `seq ${i.original_seq} of branch ${i.divergence_id} → ${i.idempotent ? "already reposted as" : "reposted as"} seq ${i.event?.seq}`,
              )
              .join("\n"),
          );
          return;
        }
        const r = await ctx.call(c, c.divergence, { room_id: roomId });
        const json = { room_id: r.room_id, branches: r.branches.map(divergenceJson) };
        if (o.export) {
          const file = resolve(o.export);
          writeFileSync(file, `${JSON.stringify({ exported_at: new Date().toISOString(), ...json }, null, 2)}\n`);
          if (!ctx.json) warn(`wrote ${r.branches.length} branch(es) to ${file}`);
        }
        emit(ctx.json, json, () => {
          if (r.branches.length === 0) return `no divergent branches preserved for ${roomId}`;
          return r.branches
            .map((b) =>
              [
                `branch ${b.divergence_id}: ${b.count} event(s) from seq ${b.from_seq} of ${b.branch_gateway_id}@${b.branch_epoch}; ${b.winning_gateway_id}@${b.winning_epoch} won (detected ${b.detected_at})${b.markers_only ? " — handover marker only" : ""}`,
                table(["SEQ", "EPOCH", "KIND", "FROM", "TEXT"], b.events.map(eventLine)),
              ].join("\n"),
            )
            .join("\n\n");
        });
      }),
    );

  groups
    .command("release <room>")
    .description("clear a quarantined or diverged status after reading its reason (replication resumes)")
    .action(
      run(async (ctx, roomId: string) => {
        const c = rooms(ctx);
        const s = await ctx.call(c, c.releaseSafety, { room_id: roomId });
        emit(ctx.json, replicaStateJson(s), () => `released ${roomId}: safety is ${s.safety_status}`);
      }),
    );
}
