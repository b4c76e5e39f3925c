import { createLogger } from "@hermes/common";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../../test/support/eventually.js";
import { A2aTasks, type TurnApprovals } from "../../src/a2a/app/a2a-tasks.js";
import { A2aTasksStore } from "../../src/a2a/store/tasks-store.js";
import { createBot, writeHomeEnv } from "../support/delivery-fixtures.js";
import { type GatedProvider, startGatedProvider } from "../support/gated-provider.js";
import { startTestGateway, type TestGateway } from "../support/gateway-harness.js";

/**
 * The seam to tool approvals: while a turn's tool call waits for an operator, its task is
 * `input-required` (a blocking send answers then, a stream ends there), and `working` again once
 * the approval is decided. The approvals here are played by the test through the seam's interface
 * (the gateway has no approvals service yet); the turn, the lane and the rows are the gateway's own.
 */

let t: TestGateway;
let gated: GatedProvider;
const watchers = new Map<string, (event: { kind: "waiting"; what: string } | { kind: "resolved" }) => void>();
const approvals: TurnApprovals = {
  watch(sessionId, listener) {
    watchers.set(sessionId, listener);
    return () => watchers.delete(sessionId);
  },
};

beforeAll(async () => {
  gated = await startGatedProvider();
  t = await startTestGateway();
  createBot(t, "tooly", { provider: "gated", model: "m", providers: { gated: { base_url: gated.url, api_key_env: "GATED_KEY" } } });
  writeHomeEnv(t.home, { GATED_KEY: "unused" });
});

afterAll(async () => {
  await t?.destroy();
  await gated?.close();
});

describe("A2A tasks and tool approvals", () => {
  it("a task is input-required while its turn's approval waits, then working, then completed", async () => {
    const tasks = new A2aTasks({
      store: new A2aTasksStore(t.gateway.db),
      profiles: t.gateway.profiles,
      sessions: t.gateway.sessions,
      chat: t.gateway.chat,
      clock: t.gateway.clock,
      logger: createLogger("a2a", "silent"),
      approvals,
    });
    const message = { message_id: "m-approval", context_id: "", task_id: "", text: "clean the disk", sender: undefined };
    const { task } = tasks.submit({ profile: "tooly", caller: { id: "a2a", name: "A2A client" }, message, message_json: "{}" });
    // The lane was free: the turn started as the task was admitted.
    expect(tasks.get(task.task_id).state).toBe("working");
    const seen: string[] = [];
    tasks.subscribe(task.task_id, (t) => seen.push(t.state));
    await eventually(() => expect(gated.held()).toBe(1));
    const blocking = tasks.wait(task.task_id, (t) => t.state === "input-required" || t.state === "completed");
    watchers.get(task.session_id)!({ kind: "waiting", what: "run_shell(rm -rf /tmp/cache)" });
    const waiting = await blocking;
    expect(waiting).toMatchObject({ state: "input-required", waiting_for: "run_shell(rm -rf /tmp/cache)" });
    expect(tasks.get(task.task_id).state).toBe("input-required");
    watchers.get(task.session_id)!({ kind: "resolved" });
    expect(tasks.get(task.task_id).state).toBe("working");
    gated.release("disk cleaned");
    const done = await tasks.wait(task.task_id, () => false);
    expect(done).toMatchObject({ state: "completed", reply: "disk cleaned" });
    expect(seen).toEqual(["input-required", "working", "completed"]);
    expect(watchers.has(task.session_id)).toBe(false);
  });
});
