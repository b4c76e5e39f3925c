import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { main } from "../../../cli/src/main.js";
import { createBot } from "../support/delivery-fixtures.js";
import { type GatedProvider, startGatedProvider } from "../support/gated-provider.js";
import { startTestGateway, TEST_KEY, type TestGateway } from "../support/gateway-harness.js";

/**
 * `hermes -p X message …` and `hermes deliveries …` against a running gateway, through the CLI's own
 * main() (the control socket, and gRPC over TCP with the key), with stdout/stderr captured.
 */

let t: TestGateway;
/** The model behind `slow`: its turns wait until the test releases them. */
let gated: GatedProvider;

beforeAll(async () => {
  t = await startTestGateway();
  gated = await startGatedProvider();
  createBot(t, "alice", { title: "Researcher" });
  createBot(t, "bob", { title: "Reviewer" });
  createBot(t, "broken", { provider: "nowhere", model: "x" });
  createBot(t, "slow", { provider: "gated", model: "m", providers: { gated: { base_url: gated.url } } }, { GATED_API_KEY: "unused" });
});
afterAll(async () => {
  await t?.destroy();
  await gated?.close();
});
afterEach(() => vi.restoreAllMocks());

/** Runs the CLI's main() with stdout/stderr captured; the output so far is readable while it runs. */
function hermesLive(...args: string[]): { done: Promise<{ code: number; stdout: string; stderr: string }>; stderr(): string } {
  let stdout = "";
  let stderr = "";
  vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    stderr += String(chunk);
    return true;
  });
  const done = main(["node", "hermes", "--home", t.home, ...args])
    .then((code) => ({ code, stdout, stderr }))
    .finally(() => vi.restoreAllMocks());
  return { done, stderr: () => stderr };
}

function hermes(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return hermesLive(...args).done;
}

/** The progress lines `message --wait` writes on stderr, without the delivery id. */
function progress(stderr: string): string[] {
  return stderr
    .split("\n")
    .filter((line) => line.startsWith("delivery "))
    .map((line) => line.replace(/^delivery \S+ /, "delivery ID "));
}

describe("hermes message", () => {
  it("prints the delivery id and exits 0", async () => {
    const r = await hermes("-p", "alice", "message", "bob", "hello bob");
    expect(r).toMatchObject({ code: 0, stderr: "" });
    const id = r.stdout.trim();
    expect(id).toMatch(/^dlv_[0-9a-f]{24}$/);
    await eventually(async () => expect((await t.gateway.deliveries.wait(id)).state).toBe("settled"));
  });

  it("--wait prints the reply; its id and each state on stderr; --json --wait the receipt", async () => {
    const r = await hermes("-p", "alice", "message", "bob", "who are you?", "--wait");
    expect(r).toMatchObject({ code: 0, stdout: "I'm bob (Reviewer), @bob.\n" });
    expect(r.stderr).toMatch(/^delivery dlv_[0-9a-f]{24} to bob: /);
    expect(progress(r.stderr).at(-1)).toBe("delivery ID to bob: settled (attempt 1)");
    const j = await hermes("--json", "-p", "alice", "message", "bob", "again", "--wait");
    expect(j.code).toBe(0);
    expect(JSON.parse(j.stdout)).toMatchObject({
      state: "settled",
      from: `alice@${t.gateway.id}`,
      target: "bob",
      attempts: 1,
      reason: null,
    });
  });

  it("--wait exits with the outcome's code and prints the typed failure", async () => {
    const r = await hermes("-p", "alice", "message", "broken", "hi", "--wait");
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(
      /\nhermes: Delivery to broken failed \[reason: missing_config\]: provider "nowhere" is not configured[^\n]*\n$/,
    );
  });

  it("--wait on a target that hangs says at once which delivery it waits for, and where it is (claimed), until it ends", async () => {
    const live = hermesLive("-p", "alice", "message", "slow", "take your time", "--wait");
    await eventually(() => expect(gated.held()).toBe(1));
    await eventually(() => expect(progress(live.stderr())).toContain("delivery ID to slow: claimed (attempt 1)"));
    const id = /^delivery (dlv_[0-9a-f]{24}) to slow: /.exec(live.stderr())?.[1];
    expect(id).toBeDefined();
    expect(t.gateway.deliveries.get(id!).state).toBe("claimed");
    gated.release("done, at last");
    const r = await live.done;
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("done, at last\n");
    expect(progress(r.stderr).at(-1)).toBe("delivery ID to slow: settled (attempt 1)");
    expect(r.stderr).not.toContain("hermes:");
  });

  it("takes the message verbatim as one argument (no shell involved)", async () => {
    const text = `quote " and $(whoami) and \`id\``;
    const r = await hermes("-p", "alice", "message", "bob", text, "--wait", "--id", "verbatim-1");
    expect(r.code).toBe(0);
    expect(t.gateway.deliveries.store.ingress("verbatim-1")!.message).toBe(text);
  });

  it("refuses usage errors with exit 2: no -p, unknown target (listing teammates), too long", async () => {
    expect((await hermes("message", "bob", "hi")).code).toBe(2);
    const unknown = await hermes("-p", "alice", "message", "nobody", "hi");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("Valid targets: default, bob, broken");
    const long = await hermes("-p", "alice", "message", "bob", "y".repeat(16_001));
    expect(long.code).toBe(2);
    expect(long.stderr).toContain("the limit is 16,000");
  });

  it("works over TCP with the key, and is refused without it", async () => {
    const url = `grpc://${t.gateway.grpcAddress}`;
    const ok = await hermes("--gateway", url, "--key", TEST_KEY, "-p", "alice", "message", "bob", "over tcp", "--wait");
    expect(ok.code).toBe(0);
    const denied = await hermes("--gateway", url, "-p", "alice", "message", "bob", "no key");
    expect(denied.code).toBe(2);
    expect(denied.stderr).toContain("API key");
  });
});

describe("hermes deliveries", () => {
  it("lists receipts, filtered by bot and state", async () => {
    const r = await hermes("deliveries", "list");
    expect(r.code).toBe(0);
    expect(r.stdout.split("\n")[0]).toMatch(/^ID\s+SIDE\s+FROM\s+TARGET\s+STATE\s+REASON\s+ATTEMPTS\s+CREATED$/);
    const failed = await hermes("--json", "deliveries", "list", "--state", "failed");
    const rows = JSON.parse(failed.stdout).deliveries as { state: string; reason: string; target: string }[];
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((d) => d.state === "failed" && d.reason === "missing_config" && d.target === "broken")).toBe(true);
    const bobs = await hermes("--json", "-p", "bob", "deliveries", "list");
    expect((JSON.parse(bobs.stdout).deliveries as { target: string }[]).every((d) => d.target === "bob")).toBe(true);
    expect((await hermes("deliveries", "list", "--state", "finished")).code).toBe(2);
  });

  it("shows one receipt as the receipt JSON", async () => {
    const sent = await hermes("-p", "alice", "message", "broken", "for show", "--id", "show-me");
    expect(sent.stdout.trim()).toBe("show-me");
    await t.gateway.deliveries.wait("show-me");
    const r = await hermes("deliveries", "show", "show-me", "--json");
    expect(r.code).toBe(0);
    const receipt = JSON.parse(r.stdout);
    expect(Object.keys(receipt)).toEqual([
      "delivery_id",
      "from",
      "target",
      "state",
      "reason",
      "error",
      "attempts",
      "created_at",
      "settled_at",
      "reply",
    ]);
    expect(receipt).toMatchObject({ delivery_id: "show-me", state: "failed", reason: "missing_config", attempts: 1, reply: null });
    const human = await hermes("deliveries", "show", "show-me");
    expect(human.stdout).toContain("state:      failed [reason: missing_config]");
    const missing = await hermes("deliveries", "show", "nope");
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("no delivery nope");
  });
});
