import { describe, expect, it } from "vitest";
import { DEMO_ROOM, MAX_GATEWAYS, memberSpecs, planMesh, preferredGatewayPorts, tryCommands } from "./demo-plan.js";

const ctx = (gateway: string, epoch: number) => ({
  hermes: "npx hermes",
  homeArg: (g: string) => `.hermes-local/${g}`,
  authority: { gateway, epoch },
});

describe("planMesh", () => {
  it("names gateways gw-1…, gives each two bots with titles, unique across the mesh", () => {
    const plan = planMesh(3);
    expect(plan.gateways.map((g) => g.name)).toEqual(["gw-1", "gw-2", "gw-3"]);
    expect(plan.gateways.map((g) => g.bots.map((b) => b.name))).toEqual([
      ["alice", "bob"],
      ["carol", "dave"],
      ["erin", "frank"],
    ]);
    for (const bot of plan.gateways.flatMap((g) => g.bots)) expect(bot.title.length).toBeGreaterThan(0);
    const all = planMesh(MAX_GATEWAYS).gateways.flatMap((g) => g.bots.map((b) => b.name));
    expect(new Set(all).size).toBe(all.length);
  });

  it("puts the first bot of each gateway in the room (2-6 members)", () => {
    expect(planMesh(3).roomMembers).toEqual([
      { profile: "alice", gateway: "gw-1" },
      { profile: "carol", gateway: "gw-2" },
      { profile: "erin", gateway: "gw-3" },
    ]);
    expect(planMesh(1).roomMembers).toEqual([
      { profile: "alice", gateway: "gw-1" },
      { profile: "bob", gateway: "gw-1" },
    ]);
    expect(planMesh(MAX_GATEWAYS).roomMembers).toHaveLength(6);
  });

  it("refuses counts outside 1..MAX_GATEWAYS", () => {
    for (const n of [0, -1, 1.5, MAX_GATEWAYS + 1, Number.NaN]) expect(() => planMesh(n)).toThrow(RangeError);
  });

  it("prefers the standard ports, gw-1 on 7440/7441, never the relay's 7450/7451", () => {
    expect(preferredGatewayPorts(1)).toEqual({ grpc: 7440, http: 7441 });
    const plan = planMesh(MAX_GATEWAYS);
    const ports = [plan.relayPorts, ...plan.gateways.map((g) => g.preferredPorts)].flatMap((p) => [p.grpc, p.http]);
    expect(new Set(ports).size).toBe(ports.length);
    expect(plan.relayPorts).toEqual({ grpc: 7450, http: 7451 });
  });
});

describe("memberSpecs", () => {
  it("spells members on other gateways as profile@gateway, relative to the authority", () => {
    const plan = planMesh(3);
    expect(memberSpecs(plan, "gw-1")).toEqual(["alice", "carol@gw-2", "erin@gw-3"]);
    expect(memberSpecs(plan, "gw-2")).toEqual(["alice@gw-1", "carol", "erin@gw-3"]);
  });
});

describe("tryCommands", () => {
  it("shows a chat, a message across gateways, the room and the move to the next gateway", () => {
    const lines = tryCommands(planMesh(3), ctx("gw-1", 1)).flatMap((s) => s.commands);
    expect(lines).toEqual([
      'npx hermes --home .hermes-local/gw-1 -p alice chat -q "hello, who are you?"',
      'npx hermes --home .hermes-local/gw-1 -p alice message carol@gw-2 "what are you working on?" --wait',
      "npx hermes --home .hermes-local/gw-1 deliveries list",
      `npx hermes --home .hermes-local/gw-1 groups send ${DEMO_ROOM} "hello @all"`,
      `npx hermes --home .hermes-local/gw-2 groups log ${DEMO_ROOM}`,
      `npx hermes --home .hermes-local/gw-2 groups replica-state ${DEMO_ROOM}`,
      `npx hermes --home .hermes-local/gw-2 groups promote ${DEMO_ROOM} --confirm --reason planned-handover`,
      `npx hermes --home .hermes-local/gw-1 groups demote ${DEMO_ROOM} --observed-gateway gw-2 --observed-epoch 2`,
      `npx hermes --home .hermes-local/gw-1 groups replicate ${DEMO_ROOM} --from gw-2 --follow`,
      `npx hermes --home .hermes-local/gw-3 groups replicate ${DEMO_ROOM} --from gw-2 --follow`,
      `npx hermes --home .hermes-local/gw-1 groups state ${DEMO_ROOM}`,
    ]);
  });

  it("after a move, sends to the current authority and moves on to the next gateway (wrapping)", () => {
    const sections = tryCommands(planMesh(3), ctx("gw-3", 3));
    const move = sections.at(-1)!;
    expect(move.title).toMatch(/from gw-3 to gw-1/);
    expect(move.commands[0]).toBe(`npx hermes --home .hermes-local/gw-1 groups promote ${DEMO_ROOM} --confirm --reason planned-handover`);
    expect(move.commands[1]).toContain("--observed-gateway gw-1 --observed-epoch 4");
    expect(sections[2]!.commands[0]).toContain(".hermes-local/gw-3 groups send");
  });

  it("without an authority in the mesh (the room was moved away): no room commands", () => {
    const titles = tryCommands(planMesh(3), { ...ctx("gw-1", 1), authority: undefined }).map((s) => s.title);
    expect(titles).toHaveLength(2);
    expect(titles.some((t) => t.includes(DEMO_ROOM))).toBe(false);
  });

  it("with one gateway: no move, and the message goes to the other local bot", () => {
    const sections = tryCommands(planMesh(1), ctx("gw-1", 1));
    expect(sections.map((s) => s.title).some((t) => /move/.test(t))).toBe(false);
    expect(sections[1]!.commands[0]).toContain("-p alice message bob ");
  });
});
