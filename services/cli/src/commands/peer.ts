import { randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { hostname } from "node:os";
import { HermesError, isErrorReason } from "@hermes/common/client";
import { DEFAULT_PROFILE, isValidGatewayId } from "@hermes/contract";
import type { A2aAnswer, A2aPeerDirectory, HermesHome, ModelConfigSource, PeerClient, PeerSender } from "@hermes/gateway/direct";
import type { Run } from "@hermes/proto/hermes/v1/peers";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import type { CommandRunner } from "../main.js";
import { emit, table } from "../output.js";

/** How long `peer dm` waits for the reply unless told (upstream `peer.dm_wait_seconds`). */
const DEFAULT_DM_WAIT_SECONDS = 600;

export interface RunJson {
  run_id: string;
  status: string;
  kind: string;
  profile: string;
  session_id: string;
  from: string;
  idempotency_key: string | null;
  reply: string | null;
  reason: string | null;
  error: string | null;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
}

/** A run with every field present, unset ones as null (what `peer status --json` prints). */
export function runJson(r: Run): RunJson {
  return {
    run_id: r.run_id,
    status: r.status,
    kind: r.kind,
    profile: r.profile,
    session_id: r.session_id,
    from: r.from,
    idempotency_key: r.idempotency_key ?? null,
    reply: r.reply ?? null,
    reason: r.reason ?? null,
    error: r.error ?? null,
    created_at: r.created_at,
    started_at: r.started_at ?? null,
    ended_at: r.ended_at ?? null,
  };
}

function describeRun(peer: string, r: Run): string {
  const lines = [
    `run:        ${r.run_id}`,
    `peer:       ${peer}/${r.profile}`,
    `status:     ${r.status}${r.reason ? ` [reason: ${r.reason}]` : ""}`,
    `from:       ${r.from}`,
    `created:    ${r.created_at}`,
    `started:    ${r.started_at ?? "-"}`,
    `ended:      ${r.ended_at ?? "-"}`,
  ];
  if (r.idempotency_key !== undefined) lines.push(`key:        ${r.idempotency_key}`);
  if (r.error) lines.push(`error:      ${r.error}`);
  if (r.reply !== undefined) lines.push(`reply:      ${r.reply}`);
  return lines.join("\n");
}

/** A dm whose run did not complete, as an error with exit code 1 (it failed on the peer). */
function runFailure(peer: string, r: Run, waitSeconds: number): HermesError {
  const data = { peer, run_id: r.run_id, status: r.status };
  if (r.status === "queued" || r.status === "running") {
    return new HermesError(
      "timeout",
      `peer ${peer}: run ${r.run_id} is still ${r.status} after ${waitSeconds} s; it goes on there. Check it with: hermes peer status ${peer} ${r.run_id}`,
      { data },
    );
  }
  if (r.status === "failed") {
    const reason = r.reason && isErrorReason(r.reason) ? r.reason : "unknown";
    return new HermesError(
      reason,
      `peer ${peer}: the turn failed [reason: ${r.reason ?? "unknown"}]: ${r.error ?? "no error text"} (run ${r.run_id})`,
      {
        data,
      },
    );
  }
  const reason = r.status === "interrupted" ? "runtime_offline" : "unknown";
  return new HermesError(reason, `peer ${peer}: run ${r.run_id} was ${r.status}: ${r.error ?? r.status}`, { data });
}

/** The message from stdin, verbatim (nothing shell-interpreted). A terminal on stdin is a usage error. */
async function readMessage(verb: string): Promise<string> {
  if (process.stdin.isTTY) {
    throw new HermesError(
      "invalid_params",
      `pipe the message in, e.g. hermes peer ${verb} NAME < message.txt (it is read from stdin, never from the command line)`,
    );
  }
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer));
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim().length === 0)
    throw new HermesError("invalid_params", `the message on stdin is empty: hermes peer ${verb} NAME < message.txt`);
  return text;
}

/** Who sends: -p (default `default`) of this home, with its display name, and this home's gateway id. */
function sender(ctx: CliContext, config: ModelConfigSource): PeerSender {
  const profile = ctx.profile ?? DEFAULT_PROFILE;
  if (!ctx.home.isLiveProfile(profile)) {
    throw new HermesError(
      "not_found",
      `no profile ${profile} in ${ctx.home.root}; the sender is a profile of this home (-p NAME, default \`default\`)`,
      {
        data: { profile },
      },
    );
  }
  let name = profile;
  try {
    name = config.forProfile(profile).persona.display_name;
  } catch {
    // A profile whose config does not validate still sends under its name.
  }
  return { profile, gateway: localGatewayId(ctx.home), name };
}

/** This home's gateway id (written on its first start), else a name made from the host name. */
function localGatewayId(home: HermesHome): string {
  const stored = existsSync(home.gatewayIdFile) ? readFileSync(home.gatewayIdFile, "utf8").trim() : "";
  if (isValidGatewayId(stored)) return stored;
  const host = hostname()
    .replace(/[^A-Za-z0-9._-]/g, "-")
    .replace(/^[^A-Za-z0-9]+/, "")
    .slice(0, 60);
  return `cli-${host || "host"}`.slice(0, 64);
}

function positiveSeconds(value: string | undefined, what: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 3600)
    throw new HermesError("invalid_params", `${what} must be a whole number of seconds from 1 to 3600, got ${value}`);
  return n;
}

/** The gateway package's `direct` entry, loaded only when a peer command runs. */
const gatewayPackage = () => import("@hermes/gateway/direct");

async function openPeer(ctx: CliContext, name: string): Promise<{ client: PeerClient; config: ModelConfigSource }> {
  const { ModelConfigSource, PeerClient, peerDirectory, assertPeerName } = await gatewayPackage();
  if (await a2aAgent(ctx, name)) {
    throw new HermesError(
      "invalid_params",
      `${name} is an A2A agent: message it with hermes peer dm ${name} (runs, status and stop are for Hermes gateways)`,
      {
        data: { peer: name },
      },
    );
  }
  const config = new ModelConfigSource(ctx.home);
  const client = PeerClient.open(peerDirectory(config), assertPeerName(name));
  return { client, config };
}

async function withPeer<T>(ctx: CliContext, name: string, fn: (client: PeerClient, config: ModelConfigSource) => Promise<T>): Promise<T> {
  const { client, config } = await openPeer(ctx, name);
  try {
    return await fn(client, config);
  } finally {
    client.close();
  }
}

/** The A2A agent registered under `name`, with the lookup that reads it, or undefined for a gateway peer or none. */
async function a2aAgent(ctx: CliContext, name: string): Promise<{ directory: A2aPeerDirectory; config: ModelConfigSource } | undefined> {
  const { ModelConfigSource, a2aPeerDirectory, assertPeerName } = await gatewayPackage();
  const config = new ModelConfigSource(ctx.home);
  const directory = a2aPeerDirectory(config);
  return directory.get(assertPeerName(name)) ? { directory, config } : undefined;
}

export interface AgentAnswerJson {
  peer: string;
  task_id: string | null;
  status: "completed" | "failed" | "canceled" | "running";
  reply: string | null;
  reason: string | null;
  error: string | null;
}

/** An A2A agent's answer as `peer dm --json` prints it: the shape of a run, in the agent's terms. */
function agentAnswerJson(peer: string, answer: A2aAnswer): AgentAnswerJson {
  const o = answer.outcome;
  const base = { peer, task_id: answer.task_id ?? null, reply: null, reason: null, error: null };
  switch (o.kind) {
    case "reply":
      return { ...base, status: "completed", reply: o.reply };
    case "failed":
      return { ...base, status: "failed", reason: o.reason, error: o.error };
    case "canceled":
      return { ...base, status: "canceled", error: o.error };
    case "open":
      return { ...base, status: "running" };
  }
}

/** A dm to an agent that did not complete, as an error with its reason (exit 1: it failed on the agent). */
function agentFailure(peer: string, a: AgentAnswerJson): HermesError | undefined {
  if (a.status === "completed") return undefined;
  const data = { peer, task_id: a.task_id, status: a.status };
  if (a.status === "failed") {
    const reason = a.reason && isErrorReason(a.reason) ? a.reason : "unknown";
    return new HermesError(reason, `A2A agent ${peer}: the task failed [reason: ${a.reason ?? "unknown"}]: ${a.error ?? "no error text"}`, {
      data,
    });
  }
  return new HermesError("unknown", `A2A agent ${peer}: the task was ${a.status}${a.error ? `: ${a.error}` : ""}`, { data });
}

export function registerPeerCommands(program: Command, run: CommandRunner): void {
  const peer = program
    .command("peer")
    .description("direct peers: other gateways this one can dial; dm and long runs in their bots' Bot Chats");

  peer
    .command("add <name>")
    .description(
      "register a peer: a Hermes gateway (--url, its key as HERMES_PEER_<NAME>_KEY) or any A2A agent (--a2a URL, its key in --key-env VAR); name/url in config.yaml",
    )
    .option("--url <url>", "a Hermes gateway's gRPC URL: grpc://HOST:PORT (grpcs:// for TLS)")
    .option("--a2a <url>", "an A2A agent's URL: where its Agent Card is (https://HOST/…/ or …/.well-known/agent-card.json)")
    .option("--key <key>", "the peer's API key (a gateway's API_SERVER_KEY; for an A2A agent, written into its key variable)")
    .option(
      "--key-env <var>",
      "A2A: the variable (HERMES_HOME/.env or the environment) holding the agent's bearer key (default HERMES_PEER_<NAME>_KEY)",
    )
    .option("--note <text>", "a note for peer list")
    .action(
      run(async (ctx, name: string, o: { url?: string; a2a?: string; keyEnv?: string; note?: string }) => {
        // `--key` is also the global option (the key for --gateway), so it lands on the program; only
        // a key given on this command line counts, never HERMES_KEY from the environment.
        const key = program.getOptionValueSource("key") === "cli" ? (program.opts() as { key?: string }).key : undefined;
        if ((o.url === undefined) === (o.a2a === undefined)) {
          throw new HermesError(
            "invalid_params",
            `name the peer's URL once: hermes peer add ${name} --url grpc://HOST:PORT --key KEY (a gateway) or --a2a URL [--key-env VAR] (an A2A agent)`,
          );
        }
        if (o.a2a !== undefined) {
          const { addA2aPeer } = await gatewayPackage();
          const r = addA2aPeer(ctx.home, { name, url: o.a2a, key_env: o.keyEnv, key, note: o.note });
          emit(
            ctx.json,
            { name, kind: "a2a", url: o.a2a, note: o.note ?? null, key_variable: r.key_variable, created: r.created },
            () =>
              `${r.created ? "added" : "updated"} A2A agent ${name} (${o.a2a}); its key is read from ${r.key_variable} (HERMES_HOME/.env or the environment)`,
          );
          return;
        }
        if (o.keyEnv !== undefined)
          throw new HermesError("invalid_params", "--key-env is for A2A agents (--a2a URL); a gateway's key is --key KEY");
        if (key === undefined)
          throw new HermesError("invalid_params", `a key is required: hermes peer add ${name} --url ${o.url} --key KEY`);
        const { addPeer } = await gatewayPackage();
        const r = addPeer(ctx.home, { name, url: o.url!, key, note: o.note });
        emit(
          ctx.json,
          { name, kind: "gateway", url: o.url, note: o.note ?? null, key_variable: r.key_variable, created: r.created },
          () => `${r.created ? "added" : "updated"} peer ${name} (${o.url}); its key is in ${ctx.home.envFile} as ${r.key_variable}`,
        );
      }),
    );

  peer
    .command("list")
    .description("registered peers, gateways and A2A agents (names, URLs, notes, whether a key is set; never the keys)")
    .action(
      run(async (ctx) => {
        const { listPeers, ModelConfigSource } = await gatewayPackage();
        const peers = listPeers(new ModelConfigSource(ctx.home));
        emit(ctx.json, { peers }, () =>
          peers.length === 0
            ? "no peers: add one with hermes peer add NAME --url grpc://HOST:PORT --key KEY (or --a2a URL for an A2A agent)"
            : table(
                ["NAME", "KIND", "URL", "KEY", "NOTE"],
                peers.map((p) => [p.name, p.kind, p.url, `${p.key_variable} ${p.key_set ? "(set)" : "(missing)"}`, p.note ?? ""]),
              ),
        );
      }),
    );

  peer
    .command("remove <name>")
    .description("remove a peer: its config.yaml entry and its key in HERMES_HOME/.env")
    .action(
      run(async (ctx, name: string) => {
        const { removePeer } = await gatewayPackage();
        const r = removePeer(ctx.home, name);
        emit(
          ctx.json,
          { name, removed: true, key_removed: r.key_removed },
          () => `removed peer ${name}${r.key_removed ? ` and ${r.key_variable}` : ` (no ${r.key_variable} was set)`}`,
        );
      }),
    );

  peer
    .command("dm <target>")
    .description("one turn in <peer>[/<profile>]'s canonical Bot Chat, message from stdin; prints the reply (-p: the sending bot)")
    .option("--wait <seconds>", `how long to wait for the reply (1-3600, default ${DEFAULT_DM_WAIT_SECONDS}); the turn goes on after`)
    .option("--idempotency-key <key>", "retrying with the same key and message returns the original reply instead of running again")
    .action(
      run(async (ctx, target: string, o: { wait?: string; idempotencyKey?: string }) => {
        const { peer: name, profile } = (await gatewayPackage()).parsePeerTarget(target);
        const wait = positiveSeconds(o.wait, "--wait", DEFAULT_DM_WAIT_SECONDS);
        const agent = await a2aAgent(ctx, name);
        if (agent) {
          if (target.includes("/"))
            throw new HermesError("invalid_params", `${name} is one A2A agent: hermes peer dm ${name} < message.txt`);
          const input = await readMessage("dm");
          const { A2aPeerClient } = await gatewayPackage();
          const client = A2aPeerClient.open(agent.directory, name, { timeoutMs: wait * 1000 });
          try {
            const from = sender(ctx, agent.config);
            const answer = await client.send({
              text: input,
              message_id: o.idempotencyKey ?? randomUUID(),
              sender: { name: from.name, handle: `${from.profile}@${from.gateway}` },
            });
            const out = agentAnswerJson(name, answer);
            const failure = agentFailure(name, out);
            if (ctx.json) emit(true, out, () => "");
            else if (!failure) emit(false, undefined, () => out.reply ?? "");
            if (failure) throw failure;
          } finally {
            client.close();
          }
          return;
        }
        const input = await readMessage("dm");
        await withPeer(ctx, name, async (client, config) => {
          const reply = await client.dm({ profile, input, sender: sender(ctx, config), idempotency_key: o.idempotencyKey }, wait);
          const r = reply.run!;
          const failure = r.status === "completed" ? undefined : runFailure(name, r, wait);
          if (ctx.json) emit(true, { ...runJson(r), replayed: reply.replayed }, () => "");
          else if (!failure) emit(false, undefined, () => r.reply ?? "");
          if (failure) throw failure;
        });
      }),
    );

  peer
    .command("run <target>")
    .description("start a long turn in <peer>[/<profile>]'s Bot Chat, message from stdin; prints the run id at once")
    .option("--idempotency-key <key>", "a stable key (1-255 characters): a retry with the same message returns the original run")
    .action(
      run(async (ctx, target: string, o: { idempotencyKey?: string }) => {
        const { peer: name, profile } = (await gatewayPackage()).parsePeerTarget(target);
        const input = await readMessage("run");
        await withPeer(ctx, name, async (client, config) => {
          const reply = await client.startRun({ profile, input, sender: sender(ctx, config), idempotency_key: o.idempotencyKey });
          const r = reply.run!;
          if (reply.replayed && !ctx.json) {
            process.stderr.write(
              `replayed: key ${JSON.stringify(r.idempotency_key)} already started run ${r.run_id} (${r.status}); nothing new started\n`,
            );
          }
          emit(ctx.json, { ...runJson(r), replayed: reply.replayed }, () => r.run_id);
        });
      }),
    );

  peer
    .command("status <name> <run-id>")
    .description("a run's status, reply or error (--wait: up to that many seconds for it to end)")
    .option("--wait <seconds>", "wait up to this long for the run to end (1-3600)")
    .action(
      run(async (ctx, name: string, runId: string, o: { wait?: string }) => {
        const wait = positiveSeconds(o.wait, "--wait", 0);
        await withPeer(ctx, name, async (client) => {
          const r = await client.getRun(runId, wait);
          emit(ctx.json, runJson(r), () => describeRun(name, r));
        });
      }),
    );

  peer
    .command("stop <name> <run-id>")
    .description("stop a run: a queued one never starts, a running turn is cancelled")
    .action(
      run(async (ctx, name: string, runId: string) => {
        await withPeer(ctx, name, async (client) => {
          const r = await client.stopRun(runId);
          emit(ctx.json, runJson(r), () => `run ${r.run_id}: ${r.status}${r.error ? ` (${r.error})` : ""}`);
        });
      }),
    );
}
