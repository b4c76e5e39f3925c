// A home network behind a NAT router, built from containers only (no --privileged):
//
//   [home node] --lan-- [router: masquerade, forward policy drop] --wan-- [vps, relay, ...]
//
// home -> wan works and is seen from the router's wan address; wan -> home has no path
// (no route to the lan, and the router drops new inbound connections) unless forwardPort().
// Pitfalls handled:
//   N1 both networks are created with enable_ip_masquerade=false, else Docker's host rule
//      rewrites packets the router forwards; Internal networks are not used (they drop routed traffic);
//   N2 our own nft table names (Docker's embedded DNS owns `table ip nat` in every container);
//   N3 no `fwd` chain name (an nft keyword);
//   N4 ip_forward through HostConfig.Sysctls, since /proc/sys is read-only in the container.
import type { Mesh } from "./mesh.js";
import type { MeshNetwork, MeshNode } from "./node.js";

export interface NatTopology {
  /** The "internet" side: put public nodes (vps gateways, relays) here. */
  wan: MeshNetwork;
  /** The private side: put home nodes here, then placeBehind() them. */
  lan: MeshNetwork;
  router: MeshNode;
  routerWanIp(): Promise<string>;
  routerLanIp(): Promise<string>;
  /**
   * Route a lan node's traffic through the router (again after each restart or reconnect).
   * `resolve`: wan nodes whose names the lan node must resolve (Docker's DNS only answers for
   * networks a container is on); their current wan addresses go into its /etc/hosts.
   */
  placeBehind(node: MeshNode, options?: { resolve?: MeshNode[] }): Promise<void>;
  /** A port forward wan:publicPort -> node:targetPort; returns the function that removes it. */
  forwardPort(publicPort: number, node: MeshNode, targetPort: number): Promise<() => Promise<void>>;
}

const NAT_TABLE = "hermes_nat";
const FW_TABLE = "hermes_fw";

export async function createNatTopology(mesh: Mesh, name: string): Promise<NatTopology> {
  const wan = await mesh.network(`${name}-wan`, { masquerade: false });
  const lan = await mesh.network(`${name}-lan`, { masquerade: false });
  // First network = default route: the router's own traffic leaves through the wan.
  const router = await mesh.plain(`${name}-router`, [wan, lan], { sysctls: { "net.ipv4.ip_forward": "1" } });

  const ruleset = `
table ip ${NAT_TABLE} {
  chain prerouting { type nat hook prerouting priority dstnat; policy accept; }
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr ${lan.subnet} ip daddr != ${lan.subnet} masquerade
  }
}
table ip ${FW_TABLE} {
  chain forward {
    type filter hook forward priority filter; policy drop;
    ct state established,related accept
    ip saddr ${lan.subnet} accept
    ct status dnat accept
  }
}
`;
  await router.container.copyContentToContainer([{ content: ruleset, target: "/tmp/hermes-nat.nft" }]);
  await router.execOk(["/usr/sbin/nft", "-f", "/tmp/hermes-nat.nft"]);

  const routerLanIp = () => router.ipOn(lan);
  const routerWanIp = () => router.ipOn(wan);

  const setDefaultRoute = async (node: MeshNode) => {
    await node.execOk(["/usr/sbin/ip", "route", "replace", "default", "via", await routerLanIp()], { user: "0" });
  };

  return {
    wan,
    lan,
    router,
    routerWanIp,
    routerLanIp,
    async placeBehind(node, options = {}) {
      if (!node.networks.some((n) => n.id === lan.id)) throw new Error(`${node.name} is not on ${lan.name}`);
      if (node.networks.length > 1) throw new Error(`${node.name} is on other networks too; a node behind NAT lives on the lan only`);
      const resolveNames = async (self: MeshNode) => {
        for (const peer of options.resolve ?? []) await self.addHostsEntry(peer.name, await peer.ipOn(wan));
      };
      await setDefaultRoute(node);
      await resolveNames(node);
      // start() runs connect hooks too, so both survive restarts as well as reconnects.
      node.onConnect(lan, setDefaultRoute);
      node.onConnect(lan, resolveNames);
    },
    async forwardPort(publicPort, node, targetPort) {
      const target = await node.ipOn(lan);
      const out = await router.execOk([
        "/usr/sbin/nft",
        "--echo",
        "--handle",
        "add",
        "rule",
        "ip",
        NAT_TABLE,
        "prerouting",
        "ip",
        "daddr",
        await routerWanIp(),
        "tcp",
        "dport",
        String(publicPort),
        "dnat",
        "to",
        `${target}:${targetPort}`,
      ]);
      const handle = /# handle (\d+)/.exec(out)?.[1];
      if (!handle) throw new Error(`nft did not report the rule handle: ${out}`);
      return async () => {
        await router.execOk(["/usr/sbin/nft", "delete", "rule", "ip", NAT_TABLE, "prerouting", "handle", handle]);
      };
    },
  };
}
