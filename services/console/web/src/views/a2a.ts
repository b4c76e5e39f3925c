import type { A2aStatus } from "../api.js";
import { h, replace } from "../dom.js";
import { badge, type Ctx, errorBox, every, section, time } from "../ui.js";

const BAD = new Set(["failed", "canceled"]);

/** A2A: the Agent Cards this gateway serves, the A2A agents it calls, and the latest tasks A2A callers started here. */
export function a2aView(root: HTMLElement, ctx: Ctx): () => void {
  const status = h("p", { class: "status", role: "status" });
  const cards = h("div", { class: "table-wrap" });
  const peers = h("div", { class: "table-wrap" });
  const tasks = h("div", { class: "table-wrap" });

  const draw = (a: A2aStatus) => {
    status.textContent = a.enabled
      ? `${a.cards.length} card(s); index card ${a.index_card_url ?? "-"}; ${a.active} task(s) running`
      : "A2A serving is off (a2a.enabled: false)";
    replace(
      cards,
      h(
        "table",
        { class: "a2a-cards" },
        h("thead", null, h("tr", null, h("th", null, "Bot"), h("th", null, "Name"), h("th", null, "Card"))),
        h(
          "tbody",
          null,
          a.cards.map((c) =>
            h("tr", { "data-profile": c.profile }, h("td", null, c.profile), h("td", null, c.name), h("td", { class: "mono" }, c.card_url)),
          ),
        ),
      ),
    );
    replace(
      peers,
      a.peers.length === 0
        ? h("p", null, "No A2A agents registered: hermes peer add NAME --a2a URL [--key-env VAR].")
        : h(
            "table",
            { class: "a2a-peers" },
            h("thead", null, h("tr", null, h("th", null, "Agent"), h("th", null, "URL"), h("th", null, "Key"))),
            h(
              "tbody",
              null,
              a.peers.map((p) =>
                h(
                  "tr",
                  null,
                  h("td", null, p.name),
                  h("td", { class: "mono" }, p.url),
                  h("td", null, `${p.key_variable} ${p.key_set ? "(set)" : "(missing)"}`),
                ),
              ),
            ),
          ),
    );
    replace(
      tasks,
      a.tasks.length === 0
        ? h("p", null, "No A2A tasks yet.")
        : h(
            "table",
            { class: "a2a-tasks" },
            h(
              "thead",
              null,
              h(
                "tr",
                null,
                h("th", null, "Task"),
                h("th", null, "Bot"),
                h("th", null, "Caller"),
                h("th", null, "State"),
                h("th", null, "Updated"),
              ),
            ),
            h(
              "tbody",
              null,
              a.tasks.map((t) =>
                h(
                  "tr",
                  { "data-task": t.task_id },
                  h("td", { class: "mono" }, t.task_id),
                  h("td", null, t.profile),
                  h("td", null, t.caller),
                  h(
                    "td",
                    null,
                    badge(t.reason ? `${t.state} [${t.reason}]` : t.state, BAD.has(t.state) ? "bad" : t.state === "completed" ? "ok" : ""),
                  ),
                  h("td", null, time(t.updated_at)),
                ),
              ),
            ),
          ),
    );
  };

  root.append(
    h("h1", null, "A2A"),
    status,
    section("Agent Cards", cards),
    section("A2A agents called", peers),
    section("Recent tasks", tasks),
  );
  return every(
    5000,
    async () => draw(await ctx.rpc.call<A2aStatus>("a2a.status", { limit: 50 })),
    (err) => replace(status, errorBox(err)),
  );
}
