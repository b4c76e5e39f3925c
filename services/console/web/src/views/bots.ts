import type { Bot, Roster } from "../api.js";
import { h, replace } from "../dom.js";
import { badge, type Ctx, errorBox, errorText, every } from "../ui.js";

/**
 * Bots across the mesh: this gateway's own (with "active now" and a Bot Chat), and those of the
 * peers and of the relay's other connections with their gateway badge. Sections and the hidden
 * toggle appear when the gateway has the Bot Mode metadata methods (profiles.update).
 */
export function botsView(root: HTMLElement, ctx: Ctx): () => void {
  const status = h("p", { class: "status", role: "status" });
  const list = h("div", { class: "bots" });
  let showHidden = false;
  let roster: Roster | undefined;
  const canHide = ctx.session.methods.includes("profiles.update");
  const toggle = h("button", { type: "button", class: "secondary", "aria-pressed": "false" }, "Show hidden bots");
  toggle.addEventListener("click", () => {
    showHidden = !showHidden;
    toggle.setAttribute("aria-pressed", String(showHidden));
    draw();
  });

  const setHidden = async (bot: Bot, hidden: boolean) => {
    try {
      await ctx.rpc.call("profiles.update", { name: bot.handle, patch: { hidden } });
      roster = await ctx.rpc.call<Roster>("bots.roster");
      draw();
    } catch (err) {
      status.textContent = errorText(err);
    }
  };

  const card = (bot: Bot) => {
    const state = bot.active ? badge("active now", "ok") : bot.online ? badge(bot.local ? "idle" : "online") : badge("offline", "bad");
    return h(
      "article",
      { class: `bot${bot.hidden ? " hidden-bot" : ""}`, "data-bot": `${bot.handle}@${bot.gateway_id}` },
      h("div", { class: "avatar", "aria-hidden": "true" }, [...(bot.display_name || bot.handle)][0]?.toUpperCase() ?? "?"),
      h(
        "div",
        { class: "bot-main" },
        h(
          "h3",
          null,
          h("span", { class: "bot-name" }, bot.display_name || bot.handle),
          " ",
          h("span", { class: "handle" }, `@${bot.handle}`),
        ),
        h("p", { class: "bot-title" }, bot.title || "—"),
        h("p", { class: "meta" }, badge(bot.gateway_id, "gateway"), " ", state, bot.hidden ? badge("hidden") : null),
      ),
      h(
        "div",
        { class: "bot-actions" },
        bot.local ? h("a", { class: "button", href: `#/chat/${encodeURIComponent(bot.handle)}` }, "Chat") : null,
        bot.local && canHide && bot.hidden !== null
          ? h(
              "label",
              { class: "inline" },
              h("input", {
                type: "checkbox",
                checked: bot.hidden,
                on: { change: (e) => void setHidden(bot, (e.target as HTMLInputElement).checked) },
              }),
              " hidden",
            )
          : null,
      ),
    );
  };

  const draw = () => {
    if (!roster) return;
    const visible = roster.bots.filter((b) => showHidden || !b.hidden);
    const hiddenCount = roster.bots.length - roster.bots.filter((b) => !b.hidden).length;
    toggle.hidden = hiddenCount === 0;
    toggle.textContent = showHidden ? "Hide hidden bots" : `Show hidden bots (${hiddenCount})`;
    if (visible.length === 0) {
      replace(list, h("p", null, "No bots yet: create one with hermes profile create NAME."));
      return;
    }
    if (!roster.sections) {
      replace(list, visible.map(card));
      return;
    }
    const groups = [...roster.sections, { id: "", name: "Unassigned" }].map((s) => ({
      s,
      bots: visible.filter((b) => (b.section ?? "") === s.id || (s.id === "" && !roster!.sections!.some((x) => x.id === b.section))),
    }));
    replace(
      list,
      groups.filter((g) => g.bots.length > 0).map((g) => h("section", { class: "bot-section" }, h("h3", null, g.s.name), g.bots.map(card))),
    );
  };

  root.append(h("h1", null, "Bots"), h("div", { class: "toolbar" }, toggle), status, list);
  return every(
    5000,
    async () => {
      roster = await ctx.rpc.call<Roster>("bots.roster");
      status.textContent = `${roster.bots.length} bot(s) across the mesh`;
      draw();
    },
    (err) => replace(status, errorBox(err)),
  );
}
