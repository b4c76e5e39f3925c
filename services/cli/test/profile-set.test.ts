import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../../gateway/test/support/fake-openai-server.js";
import { assertBuilt, type GatewayProcess, hermes, removeHome, startGatewayProcess, tempHome } from "./support/cli-harness.js";

/**
 * `hermes profile set`: one command points a bot at a real OpenAI-compatible server (here a fake
 * one on 127.0.0.1), keeping the rest of its config.yaml, and a running gateway's next turn uses it.
 */

let home: string;
let gw: GatewayProcess;
let server: FakeOpenAIServer;
const profileConfig = () => join(home, "profiles", "alice", "config.yaml");

beforeAll(async () => {
  assertBuilt();
  home = tempHome();
  server = await startFakeOpenAIServer({ api_key: "sk-local-test" });
  expect((await hermes(["profile", "create", "alice", "--title", "Researcher"], { home })).code).toBe(0);
  gw = await startGatewayProcess(home);
});

afterAll(async () => {
  await gw?.stop();
  await server?.close();
  if (home) removeHome(home);
});

describe("hermes profile set", () => {
  it("points a running bot at an OpenAI-compatible server in one command; comments and other keys stay", async () => {
    writeFileSync(profileConfig(), "# alice's settings\ntitle: Researcher # shown in rosters\n");
    writeFileSync(join(home, "profiles", "alice", ".env"), "LOCAL_LLM_KEY=sk-local-test\n", { mode: 0o600 });
    const before = await hermes(["-p", "alice", "chat", "-q", "who answers?"], { home });
    expect(before.code).toBe(0);
    expect(server.chatRequests()).toHaveLength(0);

    const r = await hermes(
      [
        "profile",
        "set",
        "alice",
        "--provider",
        "openai",
        "--base-url",
        server.url,
        "--model",
        "fake-small",
        "--api-key-env",
        "LOCAL_LLM_KEY",
      ],
      { home },
    );
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`✓ alice now uses fake-small on openai at ${server.url}; its next turn uses it (${profileConfig()})\n`);
    expect(readFileSync(profileConfig(), "utf8")).toBe(
      `# alice's settings\ntitle: Researcher # shown in rosters\nprovider: openai\nmodel: fake-small\nproviders:\n  openai:\n    base_url: ${server.url}\n    api_key_env: LOCAL_LLM_KEY\n`,
    );
    expect(statSync(profileConfig()).mode & 0o777).toBe(0o600);

    const after = await hermes(["-p", "alice", "chat", "-q", "who answers now?"], { home });
    expect(after.stderr).toBe("");
    expect(after.stdout).toBe("echo(fake-small): who answers now?\n");
    const sent = server.chatRequests().at(-1)!;
    expect((sent.body as { model: string }).model).toBe("fake-small");
    expect(sent.headers.authorization).toBe("Bearer sk-local-test");
    const shown = JSON.parse((await hermes(["--json", "profile", "show", "alice"], { home })).stdout);
    expect(shown).toMatchObject({ model: "fake-small", provider: "openai" });
  });

  it("says when the key variable is not set, and --json reports it", async () => {
    const r = await hermes(["--json", "profile", "set", "alice", "--api-key-env", "NOT_SET_ANYWHERE"], { home });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ profile: "alice", provider: "openai", api_key_env: "NOT_SET_ANYWHERE", key_set: false });
    const human = await hermes(["profile", "set", "alice", "--api-key-env", "NOT_SET_ANYWHERE"], { home });
    expect(human.stdout).toContain("its key is read from NOT_SET_ANYWHERE, which is not set");
  });

  it("refuses bad input with exit 2 (unknown profile exit 1), leaving config.yaml as it was", async () => {
    const text = readFileSync(profileConfig(), "utf8");
    for (const [args, code, message] of [
      [["profile", "set", "alice"], 2, /nothing to set/],
      [["profile", "set", "alice", "--base-url", "ftp://h/v1"], 2, /must be http:\/\/ or https:\/\//],
      [["profile", "set", "alice", "--provider", "vllm"], 2, /provider vllm has no endpoint .*: pass --base-url URL/],
      [["profile", "set", "alice", "--provider", "local", "--base-url", "http://h:1/v1"], 2, /the local provider has no endpoint/],
      [["profile", "set", "ghost", "--model", "m"], 1, /no profile ghost/],
      [["--gateway", "grpc://127.0.0.1:1", "profile", "set", "alice", "--model", "m"], 2, /run it on the gateway's own host/],
    ] as const) {
      const r = await hermes([...args], { home });
      expect(r.code, args.join(" ")).toBe(code);
      expect(r.stderr).toMatch(message);
    }
    expect(readFileSync(profileConfig(), "utf8")).toBe(text);
  });
});
