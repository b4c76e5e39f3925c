/**
 * What `hermes up` sets up and prints, as plain data (no I/O): the nodes of the local mesh, their
 * preferred ports, the demo bots, the demo room, and the "what to try" commands for the mesh as it
 * is now (so a second run after an authority move prints the next move, not the first one again).
 */

export const RELAY_NAME = "relay";
export const DEMO_ROOM = "lobby";
export const WELCOME_EVENT_ID = "hermes-up-welcome";
export const MAX_GATEWAYS = 8;

export interface DemoBot {
  name: string;
  title: string;
  description: string;
}

/** Two bots per gateway, names unique across the mesh (so a bare handle works as a target). */
const BOTS: DemoBot[] = [
  { name: "alice", title: "Researcher", description: "finds and cites sources" },
  { name: "bob", title: "Writer", description: "turns notes into prose" },
  { name: "carol", title: "Reviewer", description: "checks drafts for mistakes" },
  { name: "dave", title: "Planner", description: "breaks work into steps" },
  { name: "erin", title: "Operator", description: "keeps the machines running" },
  { name: "frank", title: "Analyst", description: "reads the numbers" },
  { name: "grace", title: "Designer", description: "sketches interfaces" },
  { name: "heidi", title: "Tester", description: "tries to break things" },
  { name: "ivan", title: "Archivist", description: "remembers what was decided" },
  { name: "judy", title: "Editor", description: "cuts what is not needed" },
  { name: "ken", title: "Translator", description: "puts things in other words" },
  { name: "lena", title: "Scheduler", description: "knows who is free when" },
  { name: "mia", title: "Scout", description: "looks ahead for problems" },
  { name: "ned", title: "Librarian", description: "files everything away" },
  { name: "olga", title: "Critic", description: "asks the hard questions" },
  { name: "pete", title: "Builder", description: "puts the pieces together" },
];

export interface GatewayPlan {
  /** Gateway id, relay connection name and peer name at once. */
  name: string;
  index: number;
  bots: DemoBot[];
  preferredPorts: { grpc: number; http: number };
}

export interface MeshPlan {
  gateways: GatewayPlan[];
  relayPorts: { grpc: number; http: number };
  /** Members of the demo room: the first bot of each gateway (at most 6, the room limit). */
  roomMembers: { profile: string; gateway: string }[];
}

export function gatewayName(index: number): string {
  return `gw-${index}`;
}

/**
 * Preferred ports: the standard 7440/7441 for gw-1 (so docs and curl examples work), then pairs
 * upwards, the relay on its standard 7450/7451; busy ones are replaced by free ones at run time.
 */
export function preferredGatewayPorts(index: number): { grpc: number; http: number } {
  const base = index <= 5 ? 7440 + 2 * (index - 1) : 7460 + 2 * (index - 6);
  return { grpc: base, http: base + 1 };
}

export function planMesh(gatewayCount: number): MeshPlan {
  if (!Number.isInteger(gatewayCount) || gatewayCount < 1 || gatewayCount > MAX_GATEWAYS) {
    throw new RangeError(`gateway count must be 1-${MAX_GATEWAYS}, got ${gatewayCount}`);
  }
  const gateways = Array.from({ length: gatewayCount }, (_, i) => ({
    name: gatewayName(i + 1),
    index: i + 1,
    bots: BOTS.slice(2 * i, 2 * i + 2),
    preferredPorts: preferredGatewayPorts(i + 1),
  }));
  const members = gateways.slice(0, 6).map((g) => ({ profile: g.bots[0]!.name, gateway: g.name }));
  // A room needs two members: with one gateway, both of its bots.
  if (gatewayCount === 1) members.push({ profile: gateways[0]!.bots[1]!.name, gateway: gateways[0]!.name });
  return { gateways, relayPorts: { grpc: 7450, http: 7451 }, roomMembers: members };
}

/** The room's member list as `groups create --members` takes it (remote ones as profile@gateway). */
export function memberSpecs(plan: MeshPlan, authority: string): string[] {
  return plan.roomMembers.map((m) => (m.gateway === authority ? m.profile : `${m.profile}@${m.gateway}`));
}

export interface TryContext {
  /** How to spell `hermes` in a terminal at the user's current directory. */
  hermes: string;
  /** How to spell each gateway's home on a command line (relative when possible). */
  homeArg: (gateway: string) => string;
  /** Who leads the demo room now and at which epoch (undefined: no gateway of the mesh leads it). */
  authority: { gateway: string; epoch: number } | undefined;
}

/**
 * A few commands to try, for the mesh as it is: a chat, a message across gateways, the room, and
 * the planned authority move to the next gateway (docs/OPERATIONS.md) in a few commands.
 */
export function tryCommands(plan: MeshPlan, ctx: TryContext): { title: string; commands: string[] }[] {
  const on = (gateway: string, rest: string) => `${ctx.hermes} --home ${ctx.homeArg(gateway)} ${rest}`;
  const names = plan.gateways.map((g) => g.name);
  const first = plan.gateways[0]!;
  const other = plan.gateways[1] ?? first;
  const me = first.bots[0]!.name;
  const them = other === first ? first.bots[1]!.name : `${other.bots[0]!.name}@${other.name}`;
  const sections = [
    { title: "talk to a bot (one turn on the embedded local model)", commands: [on(first.name, `-p ${me} chat -q "hello, who are you?"`)] },
    {
      title: `message a bot on another gateway (through the relay) and wait for its reply`,
      commands: [on(first.name, `-p ${me} message ${them} "what are you working on?" --wait`), on(first.name, "deliveries list")],
    },
  ];
  if (!ctx.authority) return sections;
  const lead = ctx.authority.gateway;
  const replica = names.find((n) => n !== lead);
  sections.push({
    title: `the room ${DEMO_ROOM}: led by ${lead}, replicated on the others`,
    commands: [
      on(lead, `groups send ${DEMO_ROOM} "hello @all"`),
      on(replica ?? lead, `groups log ${DEMO_ROOM}`),
      ...(replica ? [on(replica, `groups replica-state ${DEMO_ROOM}`)] : []),
    ],
  });
  if (!replica) return sections;
  // The planned move: onto the gateway after the current authority.
  const next = names[(names.indexOf(lead) + 1) % names.length]!;
  const epoch = ctx.authority.epoch + 1;
  const followers = names.filter((n) => n !== lead && n !== next);
  sections.push({
    title: `move ${DEMO_ROOM}'s authority from ${lead} to ${next} (docs/OPERATIONS.md, planned authority move)`,
    commands: [
      on(next, `groups promote ${DEMO_ROOM} --confirm --reason planned-handover`),
      on(lead, `groups demote ${DEMO_ROOM} --observed-gateway ${next} --observed-epoch ${epoch}`),
      on(lead, `groups replicate ${DEMO_ROOM} --from ${next} --follow`),
      ...followers.map((f) => on(f, `groups replicate ${DEMO_ROOM} --from ${next} --follow`)),
      on(lead, `groups state ${DEMO_ROOM}`),
    ],
  });
  return sections;
}
