/**
 * Data-driven room scenarios in the style of etcd raft's `testdata/*.txt`:
 *
 *     # comment
 *     <command> <args...> key=value key="quoted value"
 *     ----
 *     <expected output, one or more lines, ending at a blank line>
 *
 * `ScenarioWorld` runs the commands on simulated gateways (see README.md for the command list) and
 * checks every room invariant after each step.
 */
import type { AppendOutcome } from "../../../src/rooms/core/append.js";
import { roomInvariantViolations } from "../../../src/rooms/core/invariants.js";
import { formatAuthority, formatLineage } from "../../../src/rooms/core/lineage.js";
import { type PullEffect, type PullEvent, PullPlanner } from "../../../src/rooms/core/pull-planner.js";
import type { Refusal } from "../../../src/rooms/core/refusal.js";
import { refusal } from "../../../src/rooms/core/refusal.js";
import type { ReplicationDecision } from "../../../src/rooms/core/replication.js";
import { serverEventId } from "../../../src/rooms/core/room-state.js";
import type { Authority, DemotionRecord, LogPage, RoomEvent, RoomState } from "../../../src/rooms/core/types.js";
import { describeFence, pull } from "./pull.js";
import { SimGateway, type SimRoom } from "./sim-gateway.js";

export interface ScenarioCase {
  /** 1-based line of the directive. */
  line: number;
  directive: string;
  expected: string;
  /** Line range [start, end) of the expected block in the file, for rewriting. */
  expectedLines: [number, number];
}

export function parseScenario(text: string): ScenarioCase[] {
  const lines = text.split("\n");
  const cases: ScenarioCase[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    if (line.trim() === "" || line.startsWith("#")) {
      i++;
      continue;
    }
    if (lines[i + 1] !== "----") throw new Error(`line ${i + 1}: expected "----" after the directive ${JSON.stringify(line)}`);
    const start = i + 2;
    let end = start;
    while (end < lines.length && lines[end]!.trim() !== "") end++;
    cases.push({ line: i + 1, directive: line, expected: lines.slice(start, end).join("\n"), expectedLines: [start, end] });
    i = end;
  }
  return cases;
}

/** The script text with every expected block replaced by the actual output (REWRITE=1). */
export function rewriteScenario(text: string, cases: ScenarioCase[], actual: string[]): string {
  const lines = text.split("\n");
  for (let k = cases.length - 1; k >= 0; k--) {
    const [start, end] = cases[k]!.expectedLines;
    lines.splice(start, end - start, ...(actual[k] === "" ? [] : actual[k]!.split("\n")));
  }
  return lines.join("\n");
}

interface Directive {
  command: string;
  positional: string[];
  named: Map<string, string>;
}

function tokenize(directive: string): Directive {
  const tokens: string[] = [];
  const re = /(\S+?=)"((?:[^"\\]|\\.)*)"|"((?:[^"\\]|\\.)*)"|(\S+)/g;
  for (const match of directive.matchAll(re)) {
    if (match[1] !== undefined) tokens.push(match[1] + JSON.parse(`"${match[2]}"`));
    else if (match[3] !== undefined) tokens.push(JSON.parse(`"${match[3]}"`));
    else tokens.push(match[4]!);
  }
  const [command = "", ...rest] = tokens;
  const positional: string[] = [];
  const named = new Map<string, string>();
  for (const token of rest) {
    const eq = token.indexOf("=");
    if (eq > 0 && /^[a-z-]+$/.test(token.slice(0, eq))) named.set(token.slice(0, eq), token.slice(eq + 1));
    else positional.push(token);
  }
  return { command, positional, named };
}

const BASE_TIME_MS = Date.UTC(2025, 0, 1, 0, 0, 0);

export function shortHash(hash: string): string {
  return hash.slice(0, 6);
}

export function describeRefusal(r: Refusal): string {
  const authority = r.data.authority as Authority | undefined;
  return `refused ${r.reason}: ${r.message}${authority ? ` (authority ${formatAuthority(authority)})` : ""}`;
}

export function describeOutcome(eventId: string, outcome: AppendOutcome): string {
  switch (outcome.kind) {
    case "appended":
      return `appended ${eventId} seq=${outcome.event.seq} epoch=${outcome.event.epoch}`;
    case "idempotent":
      return `idempotent ${eventId} seq=${outcome.event.seq} epoch=${outcome.event.epoch}`;
    case "refused":
      return `${eventId}: ${describeRefusal(outcome.refusal)}`;
  }
}

function describePage(page: LogPage, since: number): string {
  const first = page.events[0];
  const range = first ? `${first.seq}..${page.events[page.events.length - 1]!.seq}` : "none";
  return `page from ${formatAuthority(page.authority)} since=${since} events=${range} latest=${page.latest_seq}`;
}

function describeDecision(decision: ReplicationDecision): string {
  const tail = (state: { last_seq: number; latest_seq: number }, caughtUp: boolean) =>
    `last_seq=${state.last_seq} latest_seq=${state.latest_seq}${caughtUp ? " caught_up" : ""}`;
  const applied = (events: RoomEvent[]) => (events.length ? `${events[0]!.seq}..${events[events.length - 1]!.seq}` : "nothing");
  switch (decision.kind) {
    case "apply":
      return `apply ${applied(decision.events)}${decision.overlap ? ` (overlap ${decision.overlap})` : ""} -> ${tail(decision.state, decision.caught_up)}`;
    case "noop":
      return `noop${decision.overlap ? ` (identical overlap ${decision.overlap})` : ""} -> ${tail(decision.state, decision.caught_up)}`;
    case "refetch":
      return `refetch since=${decision.since_seq}`;
    case "diverged": {
      const d = decision.divergence;
      return (
        `diverged at ${d.from_seq - 1}: preserved ${d.from_seq}..${decision.moved.to_seq} (${d.count} of ${d.branch_gateway_id}@${d.branch_epoch}` +
        `${d.markers_only ? ", markers only" : ""}), won by ${d.winning_gateway_id}@${d.winning_epoch}; ` +
        `apply ${applied(decision.events)} -> ${tail(decision.state, decision.caught_up)}`
      );
    }
    case "quarantined":
      return `quarantined ${decision.refusal.reason}: ${decision.refusal.message.replace(/^room \S+ quarantined: /, "")}`;
    case "refused":
      return `${describeRefusal(decision.refusal)}${decision.fence ? `; fenced by ${formatAuthority(decision.fence)}` : ""}`;
  }
}

export function describeState(gateway: string, room: SimRoom): string {
  const s = room.state;
  const parts = [
    `${gateway}/${s.room_id}:`,
    s.role,
    `authority=${formatAuthority(s.authority)}`,
    `last_seq=${s.last_seq}`,
    `latest_seq=${s.latest_seq}`,
    `max_epoch=${s.max_epoch_seen}`,
    `lineage=${formatLineage(s.lineage)}`,
    `status=${s.safety_status}`,
  ];
  if (s.fenced_by) parts.push(`fenced_by=${formatAuthority(s.fenced_by)}`);
  if (s.disbanded) parts.push("disbanded");
  if (room.divergences.length) parts.push(`divergences=${room.divergences.length}`);
  if (room.demotions.length) parts.push(`demotions=${room.demotions.length}`);
  return parts.join(" ");
}

function describeDemotion(d: DemotionRecord): string {
  return `${d.previous_gateway_id}@${d.previous_epoch} -> ${d.authority_gateway_id}@${d.authority_epoch} at last_seq=${d.last_seq} on ${d.demoted_at}`;
}

function describeEvent(event: RoomEvent): string {
  const payload = JSON.parse(event.payload_json) as Record<string, unknown>;
  const text = typeof payload.text === "string" ? ` ${JSON.stringify(payload.text)}` : "";
  return `${event.seq} e${event.epoch} ${event.kind} ${event.event_id}${text} #${shortHash(event.hash)}`;
}

function describeEffects(effects: PullEffect[]): string {
  if (effects.length === 0) return "(nothing)";
  return effects.map(describeEffect).join("; ");
}

function describeEffect(effect: PullEffect): string {
  switch (effect.kind) {
    case "fetch":
    case "prefetch":
    case "tail":
      return `${effect.kind} since=${effect.since_seq}`;
    case "apply":
      return "apply";
    case "observe":
      return `observe ${formatAuthority(effect.authority)}`;
    case "backoff":
      return `backoff ${effect.delay_ms}ms`;
    case "stop":
      return `stop ${effect.reason}`;
    case "fail":
      return `fail ${effect.refusal.reason}: ${effect.refusal.message}`;
  }
}

/** The simulated mesh a script drives. */
export class ScenarioWorld {
  readonly gateways = new Map<string, SimGateway>();
  private planner: PullPlanner | null = null;
  private readonly snapshots = new Map<string, Map<string, SimRoom>>();
  private tick = 0;

  now(): string {
    return new Date(BASE_TIME_MS + this.tick * 1000).toISOString();
  }

  gateway(id: string | undefined): SimGateway {
    const gateway = id === undefined ? undefined : this.gateways.get(id);
    if (gateway === undefined) throw new Error(`unknown gateway ${id}; declare it with "gateways"`);
    return gateway;
  }

  /** Runs one directive and returns its output. Throws on a malformed directive (a bug in the script). */
  run(directive: string): string {
    this.tick++;
    const { command, positional, named } = tokenize(directive);
    const [first, second] = positional;
    switch (command) {
      case "gateways":
        for (const id of positional) this.gateways.set(id, new SimGateway(id));
        return "";
      case "create": {
        const members = (named.get("members") ?? "ann,bob").split(",").map((id) => ({ member_id: id, profile: id }));
        const created = this.gateway(first).create(second!, named.get("name") ?? "Room", members, this.now());
        return created.ok ? `created ${second} seq=1 epoch=1 #${shortHash(created.event.hash)}` : describeRefusal(created.refusal);
      }
      case "send":
      case "legacy-send": {
        // legacy-send: a client's message as a gateway of an earlier version accepted it, under any
        // event id (even a reserved one).
        const [, , eventId] = positional;
        const payload: Record<string, unknown> = { text: named.get("text") ?? `text of ${eventId}` };
        if (named.has("thread")) payload.thread_id = named.get("thread");
        const expected = named.get("expect");
        const [outcome] = this.gateway(first).append(
          second!,
          [
            {
              origin: command === "send" ? "client" : "server",
              event_id: eventId!,
              kind: "message.user",
              actor: { kind: "user", id: named.get("user") ?? "user-1" },
              payload,
              ...(expected === undefined ? {} : { expected_latest_seq: Number(expected) }),
            },
          ],
          this.now(),
        );
        return describeOutcome(eventId!, outcome!);
      }
      case "batch": {
        const ids = positional.slice(2);
        const outcomes = this.gateway(first).append(
          second!,
          ids.map((item) => {
            const [eventId, text] = item.split(":");
            return {
              origin: "client" as const,
              event_id: eventId!,
              kind: "message.user",
              actor: { kind: "user" as const, id: "user-1" },
              payload: { text: text ?? `text of ${eventId}` },
            };
          }),
          this.now(),
        );
        return outcomes.map((outcome, k) => describeOutcome(ids[k]!.split(":")[0]!, outcome)).join("\n");
      }
      case "disband": {
        const gateway = this.gateway(first);
        const eventId = serverEventId("system:room-disbanded", gateway.storedKinds(gateway.room(second!)), "room.disbanded");
        const [outcome] = gateway.append(
          second!,
          [
            {
              origin: "server",
              event_id: eventId,
              kind: "room.disbanded",
              actor: { kind: "system", id: "room-control" },
              payload: { reason: "operator" },
            },
          ],
          this.now(),
        );
        return describeOutcome(eventId, outcome!);
      }
      case "replicate":
        return this.replicate(first!, second!, named);
      case "promote": {
        const confirm = named.get("confirm") ?? "true";
        const claimEpoch = named.has("epoch") ? Number(named.get("epoch")) : undefined;
        const plan = this.gateway(first).promote(second!, confirm === "true" ? true : confirm, named.get("reason"), this.now(), claimEpoch);
        if (!plan.ok) return describeRefusal(plan.refusal);
        const r = plan.result;
        return `promoted ${r.authority_gateway_id}@${r.authority_epoch} (previous ${r.previous_gateway_id}@${r.previous_epoch}) claim_seq=${r.claim_seq}`;
      }
      case "demote": {
        const epoch = named.get("epoch");
        const plan = this.gateway(first).demote(second!, named.get("to"), epoch === undefined ? undefined : Number(epoch), this.now());
        if (!plan.ok) return describeRefusal(plan.refusal);
        if (plan.idempotent) return `demote idempotent: follows ${plan.result.authority_gateway_id}@${plan.result.authority_epoch}`;
        return `demoted: ${describeDemotion(plan.demotion)}; follows ${plan.result.authority_gateway_id}@${plan.result.authority_epoch}`;
      }
      case "observe": {
        const fence = this.gateway(first).observe(second!, { gateway_id: named.get("gateway")!, epoch: Number(named.get("epoch")) });
        return fence ? `fenced by ${formatAuthority(fence)}` : "no change";
      }
      case "release": {
        const released = this.gateway(first).release(second!);
        return released.ok ? "released" : describeRefusal(released.refusal);
      }
      case "state":
        return describeState(first!, this.gateway(first).room(second!)) + this.reasonLine(first!, second!);
      case "log":
        return this.gateway(first).room(second!).events.map(describeEvent).join("\n");
      case "demotions": {
        const records = this.gateway(first).room(second!).demotions;
        return records.length === 0 ? "none" : records.map(describeDemotion).join("\n");
      }
      case "divergence": {
        const branches = this.gateway(first).room(second!).divergences;
        if (branches.length === 0) return "none";
        return branches
          .map(({ record, events }) =>
            [
              `from_seq=${record.from_seq} count=${record.count} branch=${record.branch_gateway_id}@${record.branch_epoch} ` +
                `winner=${record.winning_gateway_id}@${record.winning_epoch} markers_only=${record.markers_only} at=${record.detected_at}`,
              ...events.map((event) => `  ${describeEvent(event)}`),
            ].join("\n"),
          )
          .join("\n");
      }
      case "compare": {
        const [roomId, ...ids] = positional;
        const logs = ids.map((id) => this.gateway(id).room(roomId!).events);
        const length = Math.max(...logs.map((log) => log.length));
        for (let seq = 1; seq <= length; seq++) {
          const hashes = new Set(logs.map((log) => log[seq - 1]?.hash ?? "missing"));
          if (hashes.size > 1) return `differ from seq ${seq}`;
        }
        return `identical through seq ${length}`;
      }
      case "planner":
        return this.plannerStep(positional, named);
      case "snapshot":
        this.snapshots.set(named.get("name")!, this.gateway(first).snapshot());
        return "";
      case "restore":
        this.gateway(first).restore(this.snapshots.get(named.get("name")!)!);
        return "";
      default:
        throw new Error(`unknown command ${command}`);
    }
  }

  private reasonLine(gateway: string, roomId: string): string {
    const reason = this.gateway(gateway).room(roomId).state.safety_reason;
    return reason === null ? "" : `\n  reason: ${reason}`;
  }

  /**
   * `replicate <to> <room> from=<gw>`: the pull loop of testing/pull.ts. Fault injection:
   * drop-first=N drops the first N events of each page (a gap), corrupt=SEQ alters that event's text
   * in transit (a bad hash), since=N asks from N for the first page.
   */
  private replicate(to: string, roomId: string, named: Map<string, string>): string {
    const dropFirst = Number(named.get("drop-first") ?? 0);
    const corrupt = named.has("corrupt") ? Number(named.get("corrupt")) : undefined;
    const steps = pull(this.gateway(named.get("from")), this.gateway(to), roomId, () => this.now(), {
      limit: Number(named.get("limit") ?? 100),
      ...(named.has("max-bytes") ? { maxBytes: Number(named.get("max-bytes")) } : {}),
      maxPages: Number(named.get("pages") ?? 50),
      ...(named.has("since") ? { since: Number(named.get("since")) } : {}),
      tamper: (page) => {
        if (dropFirst > 0) page.events = page.events.slice(dropFirst);
        const target = page.events.find((event) => event.seq === corrupt);
        if (target) target.payload_json = JSON.stringify({ text: "tampered" });
      },
    });
    return steps
      .map((step) => {
        if (step.kind === "fenced") return describeFence(step, to);
        if (step.kind === "log_refused") return `log since=${step.since}: ${describeRefusal(step.refusal)}`;
        if (step.kind === "observed") return `observed ${formatAuthority(step.authority)}`;
        if (step.kind === "stopped") return `stopped: ${step.reason}`;
        if (step.kind === "failed") return `failed: ${describeRefusal(step.refusal)}`;
        return `${describePage(step.page, step.since)}: ${describeDecision(step.decision)}`;
      })
      .join("\n");
  }

  /**
   * `planner <event> …`: drives the pull planner alone with made-up pages and decisions and prints
   * the effects it answers (see README.md for the events).
   */
  private plannerStep(positional: string[], named: Map<string, string>): string {
    const [event] = positional;
    const num = (key: string, fallback = 0) => Number(named.get(key) ?? fallback);
    if (event === "new") {
      const limits = {
        ...(named.has("max-refetches") ? { maxRefetches: num("max-refetches") } : {}),
        ...(named.has("max-retreats") ? { maxCursorRetreats: num("max-retreats") } : {}),
        ...(named.has("max-idle") ? { maxIdlePages: num("max-idle") } : {}),
      };
      this.planner = new PullPlanner({
        mode: named.get("mode") === "follow" ? "follow" : "catch_up",
        last_seq: num("last"),
        ...(named.has("since") ? { since: num("since") } : {}),
        tail_first: named.get("tail-first") === "true",
        limits,
        backoff: { maxMs: num("max-backoff", 30_000) },
        random: () => 0.5,
      });
      return describeEffects(this.planner.start());
    }
    const planner = this.planner;
    if (planner === null) throw new Error('"planner new" first');
    let input: PullEvent;
    switch (event) {
      case "page": {
        const [from, to] = (named.get("events") ?? "none").split("..").map(Number);
        const events =
          from === undefined || Number.isNaN(from) ? [] : Array.from({ length: to! - from + 1 }, (_, i) => ({ seq: from + i }));
        const cursor = events.length ? events[events.length - 1]!.seq : num("since");
        const [gateway = "A", epoch = "1"] = (named.get("authority") ?? "A@1").split("@");
        input = {
          kind: "page",
          page: {
            room_id: "r1",
            events: events as RoomEvent[],
            cursor,
            latest_seq: num("latest", cursor),
            has_more: named.get("more") === "true",
            authority: { gateway_id: gateway, epoch: Number(epoch) },
            lineage: [],
            prev: null,
          },
        };
        break;
      }
      case "applied": {
        const kind = named.get("kind") ?? "apply";
        const state = { last_seq: num("last"), disbanded: named.get("disbanded") === "true" } as RoomState;
        const added = Array.from({ length: num("added") }, () => ({}) as RoomEvent);
        const decision =
          kind === "refetch"
            ? { kind, since_seq: num("since"), detail: "the divergence point needs the hash at that seq" }
            : kind === "quarantined"
              ? { kind, refusal: refusal("hash_mismatch", "an event does not chain"), state }
              : kind === "noop"
                ? { kind, overlap: 0, state, caught_up: true }
                : { kind: "apply", events: added, overlap: 0, state, caught_up: true };
        input = { kind: "applied", decision: decision as ReplicationDecision, before_last_seq: num("before") };
        break;
      }
      case "refused": {
        const data: Record<string, unknown> = {};
        if (named.has("latest")) data.latest_seq = num("latest");
        if (named.has("authority")) {
          const [gateway, epoch] = named.get("authority")!.split("@");
          data.authority = { gateway_id: gateway, epoch: Number(epoch) };
        }
        input = { kind: "refused", refusal: refusal((named.get("reason") ?? "unavailable") as Refusal["reason"], "refused", data) };
        break;
      }
      case "tail-ended":
        input = { kind: "tail_ended" };
        break;
      case "timer":
        input = { kind: "timer" };
        break;
      case "epoch":
        input = { kind: "epoch_known", epoch: num("epoch") };
        break;
      default:
        throw new Error(`unknown planner event ${event}`);
    }
    return describeEffects(planner.on(input));
  }

  /** Every invariant violation across all gateways and rooms. */
  violations(): string[] {
    const problems: string[] = [];
    for (const gateway of this.gateways.values()) {
      for (const room of gateway.rooms.values()) problems.push(...roomInvariantViolations(room.state, room.events));
    }
    return problems;
  }
}
