import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { AGENT_CARD_PATH, AgentCard, Message, Task, TaskState } from "@a2a-js/sdk";
import { duplicateInterfacesForLegacy } from "@a2a-js/sdk/compat/v0_3";
import { AgentEvent, type AgentExecutor, DefaultRequestHandler, InMemoryTaskStore, type User } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, restHandler } from "@a2a-js/sdk/server/express";
import express from "express";

/**
 * An external A2A agent for tests: the official SDK's own server (`DefaultRequestHandler` behind
 * its express handlers, JSON-RPC and HTTP+JSON, 1.0 and 0.3) on 127.0.0.1. What it does with a
 * message depends on the text: `fail: …` fails the task, `hang` keeps it working until canceled,
 * anything else is answered `echo: <text>`. Two more agents under the same server misbehave at the
 * transport: `/garbage/` answers JSON-RPC calls with something that is not A2A, `/stall/` never
 * answers them. With `key`, every call needs `Authorization: Bearer <key>` (the cards too).
 */
export interface A2aAgent {
  /** The agent's base URL (its card is at `<url>.well-known/agent-card.json`). */
  url: string;
  /** An agent whose JSON-RPC answers are not A2A. */
  garbageUrl: string;
  /** An agent whose JSON-RPC calls never get an answer. */
  stallUrl: string;
  /** Every message it received, as 1.0 wire JSON. */
  received: Record<string, unknown>[];
  close(): Promise<void>;
}

const text = (m: Message) => m.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");

function reply(taskId: string, contextId: string, value: string): Message {
  return Message.fromJSON({ messageId: crypto.randomUUID(), taskId, contextId, role: "ROLE_AGENT", parts: [{ text: value }] });
}

class TestExecutor implements AgentExecutor {
  private readonly hanging = new Map<string, () => void>();

  constructor(private readonly received: Record<string, unknown>[]) {}

  execute: AgentExecutor["execute"] = async (ctx, bus) => {
    const { taskId, contextId } = ctx;
    const input = text(ctx.userMessage);
    this.received.push(Message.toJSON(ctx.userMessage) as Record<string, unknown>);
    const status = (state: TaskState, message?: Message) =>
      AgentEvent.statusUpdate({ taskId, contextId, status: { state, message, timestamp: new Date().toISOString() }, metadata: undefined });
    bus.publish(
      AgentEvent.task(
        Task.fromJSON({ id: taskId, contextId, status: { state: "TASK_STATE_SUBMITTED" }, history: [Message.toJSON(ctx.userMessage)] }),
      ),
    );
    bus.publish(status(TaskState.TASK_STATE_WORKING));
    if (input.startsWith("fail:")) {
      bus.publish(status(TaskState.TASK_STATE_FAILED, reply(taskId, contextId, `cannot do that: ${input.slice(5).trim()}`)));
      return;
    }
    if (input === "hang") {
      await new Promise<void>((resolve) => this.hanging.set(taskId, resolve));
      bus.publish(status(TaskState.TASK_STATE_CANCELED, reply(taskId, contextId, "canceled")));
      return;
    }
    bus.publish(
      AgentEvent.artifactUpdate({
        taskId,
        contextId,
        artifact: {
          artifactId: "answer",
          name: "answer",
          description: "",
          parts: reply("", "", `echo: ${input}`).parts,
          metadata: undefined,
          extensions: [],
        },
        append: false,
        lastChunk: true,
        metadata: undefined,
      }),
    );
    bus.publish(status(TaskState.TASK_STATE_COMPLETED, reply(taskId, contextId, "done")));
  };

  cancelTask: AgentExecutor["cancelTask"] = async (taskId) => {
    this.hanging.get(taskId)?.();
    this.hanging.delete(taskId);
  };

  release(): void {
    for (const resolve of this.hanging.values()) resolve();
  }
}

function card(url: string, rpc: string, rest?: string): AgentCard {
  return AgentCard.fromJSON({
    name: "test agent",
    description: "the SDK's own server",
    version: "1.0.0",
    supportedInterfaces: duplicateInterfacesForLegacy(
      [
        { url: rpc, protocolBinding: "JSONRPC", protocolVersion: "1.0", tenant: "" },
        ...(rest ? [{ url: rest, protocolBinding: "HTTP+JSON", protocolVersion: "1.0", tenant: "" }] : []),
      ],
      ["JSONRPC", "HTTP+JSON"],
    ),
    capabilities: { streaming: true },
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [{ id: "echo", name: "Echo", description: "echoes", tags: ["echo"] }],
    provider: { organization: "tests", url },
  });
}

export async function startA2aAgent(options: { key?: string } = {}): Promise<A2aAgent> {
  const app = express();
  const received: Record<string, unknown>[] = [];
  const executor = new TestExecutor(received);
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const handler = new DefaultRequestHandler(card(base, `${base}/rpc`, `${base}/rest`), new InMemoryTaskStore(), executor);
  const requireKey: express.RequestHandler = (req, res, next) => {
    if (!options.key || req.header("authorization") === `Bearer ${options.key}`) next();
    else res.status(401).set("www-authenticate", "Bearer").json({ error: "unauthorized" });
  };
  const userBuilder = async (): Promise<User> => ({ isAuthenticated: true, userName: "gateway" });
  const legacyCompat = { enabled: true };
  app.use(`/${AGENT_CARD_PATH}`, requireKey, agentCardHandler({ agentCardProvider: handler, legacyCompat }));
  app.use("/rpc", requireKey, jsonRpcHandler({ requestHandler: handler, userBuilder, legacyCompat }));
  app.use("/rest", requireKey, restHandler({ requestHandler: handler, userBuilder, legacyCompat }));
  // Agents that misbehave at the transport: a well-formed card, then garbage or silence.
  for (const name of ["garbage", "stall"]) {
    const json = AgentCard.toJSON(card(base, `${base}/${name}/rpc`));
    app.get(`/${name}/${AGENT_CARD_PATH}`, requireKey, (_req, res) => void res.json(json));
  }
  app.post("/garbage/rpc", requireKey, (_req, res) => void res.type("text/html").send("<html><body>502 Bad Gateway</body></html>"));
  app.post("/stall/rpc", requireKey, () => {});
  return {
    url: `${base}/`,
    garbageUrl: `${base}/garbage/`,
    stallUrl: `${base}/stall/`,
    received,
    close: async () => {
      executor.release();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
