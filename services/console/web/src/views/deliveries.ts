import { isTerminal, RECEIPT_STATES } from "@hermes/contract";
import type { Receipt } from "../api.js";
import { h, replace } from "../dom.js";
import { badge, type Ctx, errorBox, every, time } from "../ui.js";

/** Settled is the good end; every other end (failed, cancelled, expired, ambiguous) is shown as bad. */
function stateBadge(r: Receipt): HTMLElement {
  return badge(r.reason ? `${r.state} [${r.reason}]` : r.state, r.state === "settled" ? "ok" : isTerminal(r.state) ? "bad" : "");
}

/** Delivery receipts (sent from or run on this gateway) with their state and reason; one opens in full. */
export function deliveriesView(root: HTMLElement, ctx: Ctx): () => void {
  const openId = ctx.args[0];
  const state = h(
    "select",
    { id: "filter-state" },
    h("option", { value: "" }, "any state"),
    RECEIPT_STATES.map((s) => h("option", { value: s }, s)),
  );
  const side = h(
    "select",
    { id: "filter-side" },
    h("option", { value: "" }, "sent and received"),
    h("option", { value: "outbox" }, "sent from here"),
    h("option", { value: "ingress" }, "run here"),
  );
  const bot = h("input", { id: "filter-bot", type: "search", placeholder: "bot name", autocomplete: "off" });
  const filters = h(
    "form",
    { class: "filters", role: "search" },
    h("label", { for: "filter-state" }, "State "),
    state,
    h("label", { for: "filter-side" }, "Side "),
    side,
    h("label", { for: "filter-bot" }, "Bot "),
    bot,
  );
  const status = h("p", { class: "status", role: "status" });
  const table = h("div", { class: "table-wrap" });
  const detail = h("div", { class: "delivery-detail" });

  const load = async () => {
    const params: Record<string, unknown> = { limit: 200 };
    if (state.value) params.state = state.value;
    if (side.value) params.side = side.value;
    if (bot.value.trim()) params.profile = bot.value.trim();
    const { deliveries } = await ctx.rpc.call<{ deliveries: Receipt[] }>("deliveries.list", params);
    status.textContent = `${deliveries.length} deliver${deliveries.length === 1 ? "y" : "ies"}`;
    replace(
      table,
      h(
        "table",
        { class: "deliveries" },
        h(
          "thead",
          null,
          h(
            "tr",
            null,
            ["Delivery", "From", "To", "State", "Attempts", "Created"].map((c) => h("th", { scope: "col" }, c)),
          ),
        ),
        h(
          "tbody",
          null,
          deliveries.map((d) =>
            h(
              "tr",
              { "data-delivery": d.delivery_id },
              h("td", null, h("a", { href: `#/deliveries/${encodeURIComponent(d.delivery_id)}` }, d.delivery_id)),
              h("td", null, d.from),
              h("td", null, d.target),
              h("td", null, stateBadge(d)),
              h("td", null, String(d.attempts)),
              h("td", null, time(d.created_at)),
            ),
          ),
        ),
      ),
    );
  };
  for (const el of [state, side]) el.addEventListener("change", () => void load().catch((err) => replace(status, errorBox(err))));
  filters.addEventListener("submit", (e) => {
    e.preventDefault();
    void load().catch((err) => replace(status, errorBox(err)));
  });

  const show = async (id: string) => {
    const r = await ctx.rpc.call<Receipt>("deliveries.get", { delivery_id: id });
    const rows: [string, Node | string][] = [
      ["Delivery", r.delivery_id],
      ["From", r.from],
      ["To", r.target],
      ["State", stateBadge(r)],
      ["Reason", r.reason ?? "-"],
      ["Error", r.error ?? "-"],
      ["Attempts", String(r.attempts)],
      ["Created", time(r.created_at)],
      ["Ended", time(r.settled_at)],
      ["Reply", r.reply ?? "-"],
    ];
    replace(
      detail,
      h(
        "section",
        { class: "card", "aria-labelledby": "delivery-title" },
        h("h2", { id: "delivery-title" }, "Receipt"),
        h(
          "dl",
          { class: "facts" },
          rows.map(([k, v]) => [h("dt", null, k), h("dd", { "data-field": k.toLowerCase() }, v)]),
        ),
        h("a", { href: "#/deliveries" }, "Close"),
      ),
    );
    detail.querySelector("h2")?.setAttribute("tabindex", "-1");
    (detail.querySelector("h2") as HTMLElement | null)?.focus();
  };

  root.append(h("h1", null, "Deliveries"), filters, status, detail, table);
  if (openId) void show(openId).catch((err) => replace(detail, errorBox(err)));
  return every(10_000, load, (err) => replace(status, errorBox(err)));
}
