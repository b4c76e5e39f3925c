// An OpenAI-compatible chat endpoint for container scenarios whose answers the test releases by
// hand, so a delivery can be held mid-turn while the test kills a relay or a gateway. It runs in
// its own container (base image, node, no dependencies) and is controlled over HTTP from the test
// process through a mapped port:
//   POST /v1/chat/completions   held until released (or answered at once after /control/open)
//   GET  /control/state         {held, prompts}: requests waiting, last user message of every request
//   POST /control/release       answers the oldest held request (or the next one to arrive);
//                               the body is the reply text (default "done")
//   POST /control/open          from now on every request is answered at once
// Every request is recorded, which is how a scenario proves a turn ran once (or never).
import { createServer } from "node:http";

const port = Number(process.argv[2] ?? 8080);
const waiting = [];
const prompts = [];
let credits = [];
let opened = false;

function completion(text) {
  return JSON.stringify({
    id: "chatcmpl-gated",
    object: "chat.completion",
    created: 1_700_000_000,
    model: "gated",
    choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  });
}

function answer(res, text) {
  if (res.destroyed || res.writableEnded) return false;
  res.writeHead(200, { "content-type": "application/json" });
  res.end(completion(text));
  return true;
}

function json(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/** Requests whose caller went away (a gateway killed mid-turn) are not "held" any more. */
function liveWaiting() {
  for (let i = waiting.length - 1; i >= 0; i--) if (waiting[i].destroyed) waiting.splice(i, 1);
  return waiting;
}

const server = createServer((req, res) => {
  let body = "";
  req.setEncoding("utf8");
  req.on("data", (chunk) => {
    body += chunk;
  });
  req.on("end", () => {
    const path = (req.url ?? "").split("?")[0];
    if (req.method === "POST" && path.endsWith("/chat/completions")) {
      try {
        const messages = JSON.parse(body).messages ?? [];
        const user = [...messages].reverse().find((m) => m.role === "user");
        prompts.push(typeof user?.content === "string" ? user.content : JSON.stringify(user?.content ?? ""));
      } catch {
        prompts.push("(unparsable request)");
      }
      if (opened) return void answer(res, "ok");
      const credit = credits.shift();
      if (credit !== undefined) return void answer(res, credit);
      waiting.push(res);
      return;
    }
    if (req.method === "GET" && path === "/control/state") return json(res, 200, { held: liveWaiting().length, prompts });
    if (req.method === "POST" && path === "/control/release") {
      const text = body.length > 0 ? body : "done";
      const next = liveWaiting().shift();
      if (next) answer(next, text);
      else credits.push(text);
      return json(res, 200, { released: next !== undefined });
    }
    if (req.method === "POST" && path === "/control/open") {
      opened = true;
      for (const w of waiting.splice(0)) answer(w, "ok");
      credits = [];
      return json(res, 200, { opened: true });
    }
    json(res, 404, { error: `no route ${req.method} ${path}` });
  });
});

server.listen(port, "0.0.0.0", () => process.stdout.write(`gated provider ready on :${port}\n`));
for (const signal of ["SIGTERM", "SIGINT"]) process.once(signal, () => server.close(() => process.exit(0)));
