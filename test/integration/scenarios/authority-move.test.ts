// The planned authority move of docs/OPERATIONS.md ("Rooms: planned authority move"), step by
// step, with the real `hermes` CLI inside the containers exactly as the runbook writes it: a room
// moves off "laptop" onto "server" while a third gateway, "office", replicates it. Clients write
// through the move (the ledger): nothing acknowledged is lost, the old authority refuses late
// sends once fenced, and every copy ends on one log with the same hashes.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  eventually,
  type GatewayNode,
  Ledger,
  ledgerSend,
  observed,
  RoomsClient,
  sendMany,
  startWriter,
  useMesh,
} from "../harness/index.js";

const ROOM = "plans";
const CONFIG = "rooms:\n  follow_max_backoff_seconds: 2\n";

interface CliError {
  error: { reason: string; message: string; data: { authority?: { gateway_id: string; epoch: number } } };
}

describe("scenario: planned authority move (docs/OPERATIONS.md, step by step)", () => {
  const mesh = useMesh("authority-move");
  let laptop: GatewayNode; // OLD
  let server: GatewayNode; // NEW
  let office: GatewayNode; // another replica
  let rLaptop: RoomsClient;
  let rServer: RoomsClient;
  let rOffice: RoomsClient;
  const ledger = new Ledger("authority-move");

  beforeAll(async () => {
    const lan = await mesh.network("lan");
    const start = (name: string) => mesh.gateway({ name, networks: [lan], config: CONFIG });
    [laptop, server, office] = await Promise.all([start("laptop"), start("server"), start("office")]);
    rLaptop = RoomsClient.of(laptop);
    rServer = RoomsClient.of(server);
    rOffice = RoomsClient.of(office);
  });

  afterAll(() => {
    for (const r of [rLaptop, rServer, rOffice]) r?.close();
  });

  /** `hermes ARGS` in a container; returns the output, throws unless it exits 0. */
  const ok = async (gw: GatewayNode, args: string[]) => {
    const out = await gw.hermes(args);
    if (out.exitCode !== 0) throw new Error(`${gw.name}: hermes ${args.join(" ")} exited ${out.exitCode}\n${out.stderr}`);
    return out.stdout;
  };
  const KEY = () => mesh.apiKey;

  it("moves the room with the runbook's commands, losing nothing", async () => {
    // The room lives on the laptop; the office follows it; clients write to the laptop.
    expect(await ok(laptop, ["groups", "create", "--name", "Plans", "--members", "alice,bob", "--id", ROOM])).toMatch(
      /created room plans \(authority laptop@1\)/,
    );
    await ok(office, ["groups", "replicate", ROOM, "--from", laptop.grpcUrl, "--from-key", KEY(), "--follow"]);
    await sendMany(ledger, rLaptop, ROOM, "early", 200);
    const writer = startWriter(ledger, rLaptop, ROOM, "laptop", { concurrency: 2, pauseMs: 10 });

    // 1. Replicate onto the new authority and keep it following.
    const step1 = await ok(server, ["groups", "replicate", ROOM, "--from", laptop.grpcUrl, "--from-key", KEY(), "--follow"]);
    expect(step1).toMatch(/plans: stored up to seq \d+ \(\d+ new\), authority laptop@1, caught up/);
    expect(step1).toMatch(/following: the gateway keeps tailing grpc:\/\/laptop:7440/);
    const state1 = await ok(server, ["groups", "replica-state", ROOM]); // caught up: yes; safety: passive; following
    expect(state1).toMatch(/caught up\s+yes/);
    expect(state1).toMatch(/safety\s+passive/);
    expect(state1).toMatch(/following\s+following from grpc:\/\/laptop:7440/);

    // 2. Quiesce the old authority's writers (here: the clients stop sending to the laptop).
    await writer.stop();
    const head = (await rLaptop.state(ROOM)).latest_seq;

    // 3. Check coverage once more, then promote (refused without --confirm: 4118's reason, exit 2).
    await eventually(
      async () => {
        const s = await server.hermesJson<{ last_seq: number; latest_seq: number }>(["groups", "replica-state", ROOM]);
        return s.last_seq === head && s.latest_seq === head;
      },
      { what: "the server to hold the laptop's head" },
    );
    const unconfirmed = await server.hermes(["groups", "promote", ROOM]);
    expect(unconfirmed.exitCode).toBe(2);
    expect(unconfirmed.stderr).toMatch(/Fencing checklist before promoting plans on server/);
    const promoted = await ok(server, ["groups", "promote", ROOM, "--confirm", "--reason", "planned-handover"]);
    expect(promoted).toContain(`promoted: server leads plans at epoch 2 (was laptop@1); authority.claimed at seq ${head + 1}`);
    expect(promoted).toContain("next, on laptop: hermes groups demote plans --observed-gateway server --observed-epoch 2");

    //    The server told the laptop about its claim: the laptop fences itself and refuses sends
    //    with authority_conflict naming the server in data.authority.
    const late = await eventually(
      async () => {
        const out = await laptop.hermes(["--json", "groups", "send", ROOM, "a late message", "--event-id", `late-${Date.now()}`]);
        return out.exitCode === 2 ? (JSON.parse(out.stderr) as CliError) : false;
      },
      { what: "the laptop to fence itself" },
    );
    expect(late.error.reason).toBe("authority_conflict");
    expect(late.error.data.authority).toEqual({ gateway_id: "server", epoch: 2 });
    const refused = await ledgerSend(ledger, rLaptop, ROOM, "refused-after-fence");
    expect(refused.outcome).toBe("refused");
    expect(await ok(laptop, ["groups", "state", ROOM])).toMatch(/fenced by\s+server@2/);

    // 4. Demote the old authority with the exact values promote printed (a lower epoch is refused).
    const regression = await laptop.hermes(["groups", "demote", ROOM, "--observed-gateway", "server", "--observed-epoch", "1"]);
    expect(regression.exitCode).toBe(2);
    expect(await ok(laptop, ["groups", "demote", ROOM, "--observed-gateway", "server", "--observed-epoch", "2"])).toMatch(
      /demoted: plans now follows server@2 \(recorded beside the log: hermes groups replica-state plans\)/,
    );
    expect(await ok(laptop, ["groups", "demote", ROOM, "--observed-gateway", "server", "--observed-epoch", "2"])).toMatch(
      /already follows server@2/,
    );

    // 5. The old authority replicates from the new one; clients now write to the server.
    const step5 = await ok(laptop, ["groups", "replicate", ROOM, "--from", server.grpcUrl, "--from-key", KEY(), "--follow"]);
    expect(step5).not.toMatch(/DIVERGED|handover marker/);
    await sendMany(ledger, rServer, ROOM, "server", 100);
    const onLaptop = await ok(laptop, ["groups", "state", ROOM]); // authority NEW@2, role replica
    expect(onLaptop).toMatch(/authority\s+server@2/);
    expect(onLaptop).toMatch(/role here\s+replica/);
    const onServer = await ok(server, ["groups", "state", ROOM]); // authority NEW@2, role authority
    expect(onServer).toMatch(/authority\s+server@2/);
    expect(onServer).toMatch(/role here\s+authority/);
    // A clean move: nothing off the winning lineage, no alarm; the demotion is an audit record.
    const branches = await laptop.hermesJson<{ branches: unknown[] }>(["groups", "divergence", ROOM]);
    expect(branches.branches).toEqual([]);
    const replicaState = await laptop.hermesJson<{ safety_status: string; demoted: { authority_gateway_id: string } | null }>([
      "groups",
      "replica-state",
      ROOM,
    ]);
    expect(replicaState).toMatchObject({ safety_status: "passive", demoted: { authority_gateway_id: "server" } });

    // 6. Other replicas that followed the old authority stop by themselves (naming the new one);
    //    point them at the new authority.
    const officeState = await eventually(
      async () => {
        const out = await ok(office, ["groups", "replica-state", ROOM]);
        return /following\s+stopped/.test(out) ? out : false;
      },
      { what: "the office's follower to stop" },
    );
    expect(officeState).toMatch(/following\s+stopped from grpc:\/\/laptop:7440 \(not_authority: .*demoted in favour of server@2/);
    const officeMove = await ok(office, ["groups", "replicate", ROOM, "--from", server.grpcUrl, "--from-key", KEY(), "--follow"]);
    expect(officeMove).toMatch(/authority server@2, caught up/);

    // Every copy on one log; every acknowledged send on it once; the late one nowhere.
    const final = (await rServer.state(ROOM)).latest_seq;
    await eventually(
      async () => {
        const [l, o] = await Promise.all([rLaptop.replicaState(ROOM), rOffice.replicaState(ROOM)]);
        return l.last_seq === final && o.last_seq === final;
      },
      { what: "laptop and office to follow the server" },
    );
    const [logServer, logLaptop, logOffice] = await Promise.all([rServer.fullLog(ROOM), rLaptop.fullLog(ROOM), rOffice.fullLog(ROOM)]);
    expect(logLaptop.map((e) => e.hash)).toEqual(logServer.map((e) => e.hash));
    expect(logOffice.map((e) => e.hash)).toEqual(logServer.map((e) => e.hash));
    expect(logServer[head]).toMatchObject({ seq: head + 1, kind: "authority.claimed", epoch: 2 });
    const verdict = ledger.verify({ main: observed(logServer, "server") });
    ledger.assertClean(verdict);
    expect(verdict.refused).toBeGreaterThanOrEqual(1);
    expect(verdict.preserved).toBe(0);
  });
});
