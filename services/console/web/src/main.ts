import "./style.css";
import type { Session } from "./api.js";
import { h, replace } from "./dom.js";
import { Rpc } from "./rpc.js";
import { type Ctx, errorBox, type View } from "./ui.js";
import { a2aView } from "./views/a2a.js";
import { botsView } from "./views/bots.js";
import { chatView } from "./views/chat.js";
import { deliveriesView } from "./views/deliveries.js";
import { meshView } from "./views/mesh.js";
import { roomsView } from "./views/rooms.js";
import { runbookView } from "./views/runbook.js";

/** The views, in the order of the navigation bar; the route is `#/<name>/<args…>`. */
const VIEWS: { name: string; label: string; view: View }[] = [
  { name: "bots", label: "Bots", view: botsView },
  { name: "chat", label: "Bot Chat", view: chatView },
  { name: "rooms", label: "Rooms", view: roomsView },
  { name: "deliveries", label: "Deliveries", view: deliveriesView },
  { name: "a2a", label: "A2A", view: a2aView },
  { name: "mesh", label: "Mesh", view: meshView },
  { name: "runbook", label: "Runbook", view: runbookView },
];

function route(): { name: string; args: string[] } {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const name = VIEWS.some((v) => v.name === parts[0]) ? parts[0]! : "bots";
  return { name, args: parts.slice(1) };
}

async function start(): Promise<void> {
  const app = document.getElementById("app")!;
  const rpc = new Rpc();
  let session: Session;
  try {
    session = await rpc.call<Session>("console.session");
  } catch (err) {
    replace(app, h("main", { id: "main" }, h("h1", null, "Hermes console"), errorBox(err)));
    return;
  }
  document.title = `Hermes · ${session.gateway_id}`;
  const connection = h("span", { class: "connection", role: "status", "aria-live": "polite" }, "connected");
  rpc.onState((s) => {
    connection.textContent = s === "open" ? "connected" : s === "connecting" ? "connecting…" : "disconnected";
    connection.className = `connection ${s}`;
  });
  const links = VIEWS.map((v) => h("a", { href: `#/${v.name}`, class: "nav-link", "data-view": v.name }, v.label));
  const logout = session.key_required
    ? h("form", { method: "post", action: "/logout", class: "logout" }, h("button", { type: "submit", class: "logout-button" }, "Log out"))
    : null;
  const main = h("main", { id: "main", tabindex: "-1" });
  replace(
    app,
    h(
      "header",
      { class: "top" },
      h("span", { class: "brand" }, "Hermes"),
      h("span", { class: "badge gateway", title: "this gateway" }, session.gateway_id),
      connection,
      logout,
    ),
    h("nav", { "aria-label": "Views" }, links),
    main,
  );

  let stop: () => void = () => {};
  const show = () => {
    stop();
    const r = route();
    for (const a of links) {
      if (a.dataset.view === r.name) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
    const entry = VIEWS.find((v) => v.name === r.name)!;
    main.replaceChildren();
    main.dataset.view = r.name;
    const ctx: Ctx = { rpc, session, args: r.args };
    stop = entry.view(main, ctx);
  };
  window.addEventListener("hashchange", show);
  show();
}

void start();
