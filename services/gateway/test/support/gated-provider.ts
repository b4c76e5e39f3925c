import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * An OpenAI-compatible chat endpoint whose answers the test releases by hand, so a delivery can be
 * held mid-turn while the test kills a relay or a gateway. Every request is counted with the last
 * user message it carried, which is how tests prove a turn ran once (or never).
 */
export interface GatedProvider {
  /** base_url to configure: `http://127.0.0.1:<port>/v1`. */
  readonly url: string;
  /** The last user message of every chat request received, in order. */
  readonly prompts: string[];
  /** Requests waiting for a release. */
  held(): number;
  /** Answers the oldest held request (or the next one to arrive) with this text. */
  release(text?: string): void;
  /** From now on every request is answered at once. */
  open(): void;
  close(): Promise<void>;
}

function completion(text: string): string {
  return JSON.stringify({
    id: "chatcmpl-gated",
    object: "chat.completion",
    created: 1_700_000_000,
    model: "gated",
    choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  });
}

export async function startGatedProvider(): Promise<GatedProvider> {
  const waiting: ServerResponse[] = [];
  const prompts: string[] = [];
  let credits: string[] = [];
  let opened = false;
  const answer = (res: ServerResponse, text: string) => {
    if (res.destroyed) return;
    res.writeHead(200, { "content-type": "application/json" });
    res.end(completion(text));
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      if (!req.url?.endsWith("/chat/completions")) {
        res.writeHead(404).end();
        return;
      }
      try {
        const messages = (JSON.parse(body) as { messages: { role: string; content: unknown }[] }).messages;
        const user = [...messages].reverse().find((m) => m.role === "user");
        prompts.push(typeof user?.content === "string" ? user.content : JSON.stringify(user?.content ?? ""));
      } catch {
        prompts.push("(unparsable request)");
      }
      if (opened) return answer(res, "ok");
      const credit = credits.shift();
      if (credit !== undefined) return answer(res, credit);
      waiting.push(res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    prompts,
    held: () => waiting.filter((r) => !r.destroyed).length,
    release(text = "released") {
      for (;;) {
        const res = waiting.shift();
        if (!res) {
          credits.push(text);
          return;
        }
        if (!res.destroyed) return answer(res, text);
      }
    },
    open() {
      opened = true;
      for (const res of waiting.splice(0)) answer(res, "ok");
      credits = [];
    },
    async close() {
      for (const res of waiting.splice(0)) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
