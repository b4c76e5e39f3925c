import type { MeshGateway, MeshStatus } from "../api.js";
import { h, replace, svg } from "../dom.js";
import { badge, type Ctx, errorBox, every, time } from "../ui.js";

const BOX_W = 160;
const BOX_H = 84;
const GAP = 24;

function uptime(s: number | null): string {
  if (s === null) return "";
  if (s < 120) return `up ${Math.round(s)} s`;
  if (s < 7200) return `up ${Math.round(s / 60)} min`;
  return `up ${Math.round(s / 3600)} h`;
}

/** The picture: the relay and the coordinator on top, the gateways below, a line for each live link. */
function picture(status: MeshStatus): SVGElement {
  const n = Math.max(1, status.gateways.length);
  const width = Math.max(720, n * (BOX_W + GAP) + GAP);
  const hubs = status.relay !== null || status.coordinator !== null;
  const gy = hubs ? 190 : 20;
  const height = gy + BOX_H + 26;
  const gx = (i: number) => GAP + i * ((width - GAP) / n) + ((width - GAP) / n - GAP - BOX_W) / 2;
  const hub = { x: width / 2, y: 56 };
  const parts: SVGElement[] = [];
  const title = `Mesh seen from ${status.self}: ${status.gateways.length} gateway(s)${status.relay ? ", a relay" : ""}${status.coordinator ? ", a coordinator" : ""}`;
  parts.push(svg("title", null, title));

  status.gateways.forEach((g, i) => {
    const cx = gx(i) + BOX_W / 2;
    if (status.relay && g.relay_state && g.relay_state !== "disabled") {
      const up = g.relay_state === "connected";
      parts.push(svg("line", { x1: cx, y1: gy, x2: hub.x, y2: hub.y + 22, class: `link ${up ? "up" : "down"}` }));
    }
  });
  if (status.relay) {
    parts.push(
      svg(
        "g",
        { class: `node relay ${status.relay.state}`, "data-node": "relay" },
        svg("rect", { x: hub.x - 90, y: hub.y - 24, width: 180, height: 46, rx: 23 }),
        svg("text", { x: hub.x, y: hub.y - 4, "text-anchor": "middle", class: "name" }, "relay"),
        svg("text", { x: hub.x, y: hub.y + 13, "text-anchor": "middle", class: "small" }, `link ${status.relay.state}`),
      ),
    );
  }
  if (status.coordinator) {
    parts.push(
      svg(
        "g",
        { class: `node coordinator ${status.coordinator.state}`, "data-node": "coordinator" },
        svg("rect", { x: 16, y: hub.y - 24, width: 170, height: 46, rx: 8 }),
        svg("text", { x: 101, y: hub.y - 4, "text-anchor": "middle", class: "name" }, "coordinator"),
        svg("text", { x: 101, y: hub.y + 13, "text-anchor": "middle", class: "small" }, status.coordinator.state),
      ),
    );
  }
  status.gateways.forEach((g: MeshGateway, i) => {
    const x = gx(i);
    const cls = `node gateway${g.via === "self" ? " self" : ""}${g.reachable ? "" : " unreachable"}${g.leads.length > 0 ? " leader" : ""}`;
    const facts = g.reachable ? [g.version ? `v${g.version}` : g.via, uptime(g.uptime_seconds)].filter(Boolean).join(" · ") : "unreachable";
    parts.push(
      svg(
        "g",
        { class: cls, "data-node": g.gateway_id },
        svg("rect", { x, y: gy, width: BOX_W, height: BOX_H, rx: 10 }),
        svg("text", { x: x + BOX_W / 2, y: gy + 22, "text-anchor": "middle", class: "name" }, g.gateway_id),
        svg("text", { x: x + BOX_W / 2, y: gy + 40, "text-anchor": "middle", class: "small" }, facts),
        svg(
          "text",
          { x: x + BOX_W / 2, y: gy + 60, "text-anchor": "middle", class: "leads" },
          g.leads.length > 0 ? `★ leads ${g.leads.join(", ")}` : "",
        ),
        svg(
          "text",
          { x: x + BOX_W / 2, y: gy + 76, "text-anchor": "middle", class: "small" },
          g.via === "self" ? "this gateway" : `via ${g.via}`,
        ),
      ),
    );
  });
  return svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title, class: "mesh-picture" }, parts);
}

/** The mesh as this gateway sees it, drawn; per room its authority, epoch, and each copy's lag. */
export function meshView(root: HTMLElement, ctx: Ctx): () => void {
  const status = h("p", { class: "status", role: "status" });
  const drawing = h("figure", { class: "mesh" });
  const gateways = h("div", { class: "table-wrap" });
  const rooms = h("div", { class: "mesh-rooms" });
  root.append(h("h1", null, "Mesh"), status, drawing, h("h2", null, "Gateways"), gateways, h("h2", null, "Rooms"), rooms);

  const draw = (s: MeshStatus) => {
    status.textContent = `as seen from ${s.self} at ${time(s.observed_at)}`;
    replace(
      drawing,
      picture(s),
      h(
        "figcaption",
        null,
        s.relay ? `relay ${s.relay.url} (${s.relay.state})` : "no relay",
        s.coordinator ? ` · coordinator ${s.coordinator.state}` : " · no coordinator",
      ),
    );
    replace(
      gateways,
      h(
        "table",
        null,
        h(
          "thead",
          null,
          h(
            "tr",
            null,
            ["Gateway", "Reachable", "Version", "Uptime", "Relay link", "Console"].map((c) => h("th", { scope: "col" }, c)),
          ),
        ),
        h(
          "tbody",
          null,
          s.gateways.map((g) =>
            h(
              "tr",
              { "data-gateway": g.gateway_id },
              h("td", null, badge(g.gateway_id, "gateway"), g.via === "self" ? " (this one)" : ` via ${g.via}`),
              h("td", null, g.reachable ? badge("yes", "ok") : badge(g.error ? `no: ${g.error}` : "no", "bad")),
              h("td", null, g.version ?? "-"),
              h("td", null, uptime(g.uptime_seconds) || "-"),
              h("td", null, g.relay_state ?? "-"),
              h("td", null, g.console_url && g.via !== "self" ? h("a", { href: g.console_url }, "open") : "-"),
            ),
          ),
        ),
      ),
    );
    replace(
      rooms,
      s.rooms.length === 0
        ? h("p", null, "No rooms.")
        : s.rooms.map((r) =>
            h(
              "section",
              { class: "card", "data-room": r.room_id },
              h("h3", null, h("span", { class: "room-name" }, r.name), " ", h("span", { class: "handle" }, r.room_id)),
              h(
                "p",
                { class: "meta" },
                "authority ",
                badge(`${r.authority.gateway_id}@${r.authority.epoch}`, "gateway"),
                ` · latest seq ${r.latest_seq ?? "unknown"} · `,
                badge(r.safety, r.safety === "ok" ? "ok" : r.safety === "lagging" ? "" : "bad"),
                r.safety_detail ? ` ${r.safety_detail}` : "",
              ),
              h(
                "table",
                { class: "copies" },
                h(
                  "thead",
                  null,
                  h(
                    "tr",
                    null,
                    ["Copy on", "Role", "Epoch", "Stored seq", "Lag", "Safety", "Following"].map((c) => h("th", { scope: "col" }, c)),
                  ),
                ),
                h(
                  "tbody",
                  null,
                  r.copies.map((c) =>
                    h(
                      "tr",
                      { "data-copy": c.gateway_id },
                      h("td", null, badge(c.gateway_id, "gateway")),
                      h("td", null, c.role),
                      h("td", null, String(c.epoch)),
                      h("td", null, String(c.stored_seq)),
                      h("td", { "data-lag": c.lag ?? "" }, c.lag === null ? "?" : String(c.lag)),
                      h(
                        "td",
                        null,
                        c.safety_reason ? `${c.safety_status} (${c.safety_reason})` : c.safety_status,
                        c.demoted ? " · demoted" : "",
                      ),
                      h("td", null, c.following ?? "-"),
                    ),
                  ),
                ),
              ),
            ),
          ),
    );
  };
  return every(
    3000,
    async () => draw(await ctx.rpc.call<MeshStatus>("mesh.status")),
    (err) => replace(status, errorBox(err)),
  );
}
