// The gated provider (standin/gated-provider.mjs) in its own container: gateways on its network
// use it as an OpenAI-compatible endpoint; the test holds and releases turns through a mapped port.
import { fileURLToPath } from "node:url";
import type { Mesh } from "./mesh.js";
import type { MeshNetwork, MeshNode } from "./node.js";

const SOURCE = fileURLToPath(new URL("../standin/gated-provider.mjs", import.meta.url));
const PORT = 8080;

export interface GatedProviderState {
  /** Requests waiting for a release. */
  held: number;
  /** The last user message of every request received, in order. */
  prompts: string[];
}

export class GatedProvider {
  constructor(readonly node: MeshNode) {}

  /** base_url for a profile's `providers` entry (resolvable on the provider's networks). */
  get baseUrl(): string {
    return `http://${this.node.name}:${PORT}/v1`;
  }

  private async control(method: "GET" | "POST", path: string, body?: string): Promise<unknown> {
    const res = await fetch(`${this.node.hostUrl(PORT)}${path}`, { method, ...(body === undefined ? {} : { body }) });
    if (!res.ok) throw new Error(`gated provider ${path}: HTTP ${res.status}`);
    return res.json();
  }

  state(): Promise<GatedProviderState> {
    return this.control("GET", "/control/state") as Promise<GatedProviderState>;
  }

  /** Answers the oldest held request (or the next to arrive) with `text`. */
  async release(text: string): Promise<void> {
    await this.control("POST", "/control/release", text);
  }

  /** Every request from now on is answered at once. */
  async open(): Promise<void> {
    await this.control("POST", "/control/open");
  }
}

export async function startGatedProvider(mesh: Mesh, name: string, networks: MeshNetwork[]): Promise<GatedProvider> {
  const node = await mesh.script(name, networks, {
    source: SOURCE,
    args: [String(PORT)],
    ports: [PORT],
    readyLine: /gated provider ready/,
  });
  return new GatedProvider(node);
}
