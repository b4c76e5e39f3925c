import type { MeshStatus, RoomEvent, RoomState, RoomView } from "../api.js";
import { h, replace } from "../dom.js";
import { RpcError } from "../rpc.js";
import { badge, type Ctx, errorBox, errorText, newEventId, time } from "../ui.js";

/** Events of the live log kept on the page. */
const KEEP = 300;

function who(e: RoomEvent): string {
  return e.actor.display_name ?? e.actor.profile ?? e.actor.id;
}

/** One log line: messages as speech, the discussion's turns and the room's life as quiet notes. */
function line(e: RoomEvent): HTMLElement {
  const p = e.payload;
  const text = typeof p.text === "string" ? p.text : "";
  const note = (t: string) =>
    h("li", { class: "event note", "data-seq": e.seq, "data-kind": e.kind }, h("span", { class: "seq" }, `#${e.seq}`), " ", t);
  switch (e.kind) {
    case "message.user":
    case "message.member":
      return h(
        "li",
        { class: `event msg ${e.kind === "message.user" ? "user" : "member"}`, "data-seq": e.seq, "data-kind": e.kind },
        h("span", { class: "who" }, who(e)),
        h("p", { class: "text" }, text),
        h("time", null, time(e.created_at)),
      );
    case "turn.started":
      return note(`${String(p.member_id ?? "?")} is answering…`);
    case "turn.settled":
      return note(p.passed ? `${String(p.member_id ?? "?")} passed` : `${String(p.member_id ?? "?")} answered`);
    case "turn.failed":
      return note(`${String(p.member_id ?? "?")} failed [${String(p.reason_code ?? "unknown")}]: ${String(p.error ?? "")}`);
    case "room.created":
      return note(`room created by ${who(e)}`);
    case "room.renamed":
      return note(`renamed to ${String(p.name ?? "")}`);
    case "authority.claimed":
      return note(`${who(e)} now leads the room (epoch ${e.epoch})`);
    default:
      return note(e.kind);
  }
}

/** A room's live log over groups.subscribe, its members with their gateways, needs-you, and a message box. */
export function roomsView(root: HTMLElement, ctx: Ctx): () => void {
  const roomId = ctx.args[0];
  const picker = h("nav", { class: "room-list", "aria-label": "Rooms" });
  const detail = h("div", { class: "room-detail" });
  root.append(h("h1", null, "Rooms"), h("div", { class: "rooms" }, picker, detail));
  const cleanups: (() => void)[] = [];
  let stopped = false;

  void ctx.rpc
    .call<{ rooms: RoomView[] }>("groups.list", { limit: 500 })
    .then(({ rooms }) => {
      if (stopped) return;
      if (rooms.length === 0) replace(picker, h("p", null, "No rooms on this gateway."));
      else
        replace(
          picker,
          h(
            "ul",
            null,
            rooms.map((r) =>
              h(
                "li",
                null,
                h(
                  "a",
                  {
                    href: `#/rooms/${encodeURIComponent(r.room_id)}`,
                    class: "room-link",
                    "aria-current": r.room_id === roomId ? "page" : null,
                  },
                  h("span", { class: "room-name" }, r.name),
                  " ",
                  badge(r.role === "authority" ? "leads" : "replica"),
                ),
              ),
            ),
          ),
        );
      if (!roomId && rooms[0]) location.replace(`#/rooms/${encodeURIComponent(rooms[0].room_id)}`);
    })
    .catch((err) => replace(picker, errorBox(err)));

  if (roomId) cleanups.push(openRoom(detail, ctx, roomId));
  return () => {
    stopped = true;
    for (const c of cleanups) c();
  };
}

function openRoom(detail: HTMLElement, ctx: Ctx, roomId: string): () => void {
  const heading = h("h2", { class: "room-title" }, roomId);
  const facts = h("p", { class: "meta" });
  const needsYou = h("p", { class: "needs-you", role: "status", hidden: true }, "A member asked for you (@user).");
  const members = h("ul", { class: "members", "aria-label": "Members" });
  const log = h("ol", { class: "room-log", "aria-live": "polite", "aria-label": "Room log" });
  const input = h("textarea", { id: "room-input", rows: 2, required: true, placeholder: "Message the room", "aria-label": "Message" });
  const send = h("button", { type: "submit" }, "Send");
  const status = h("p", { class: "status", role: "status" });
  const form = h("form", { class: "composer" }, input, send);
  replace(detail, heading, facts, needsYou, h("h3", null, "Members"), members, log, status, form);

  const seen = new Set<number>();
  let subscription: string | undefined;
  let stopped = false;
  let refreshTimer: ReturnType<typeof setTimeout> | undefined;

  const refresh = async () => {
    const s = await ctx.rpc.call<RoomState>("groups.state", { room_id: roomId });
    const r = s.room;
    heading.textContent = r.name;
    replace(
      facts,
      "authority ",
      badge(`${r.authority_gateway_id}@${r.authority_epoch}`, "gateway"),
      ` · this gateway: ${r.role} · seq ${r.latest_seq} · ${r.safety_status}`,
      s.driver_status !== "none" ? ` · discussion: ${s.driver_status}` : "",
    );
    needsYou.hidden = !s.needs_you;
    replace(
      members,
      r.members.map((m) =>
        h("li", null, h("span", { class: "member" }, m.profile), " ", badge(m.gateway_id ?? r.authority_gateway_id, "gateway")),
      ),
    );
  };
  const refreshSoon = () => {
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => {
      refreshTimer = undefined;
      if (!stopped) void refresh().catch(() => undefined);
    }, 300);
  };

  const offEvents = ctx.rpc.on("groups.events", (params) => {
    const page = params.page as { events?: RoomEvent[] } | undefined;
    for (const e of page?.events ?? []) {
      if (e.room_id !== roomId || seen.has(e.seq)) continue;
      seen.add(e.seq);
      const el = line(e);
      const next = [...log.children].find((c) => Number((c as HTMLElement).dataset.seq) > e.seq);
      if (next) log.insertBefore(el, next);
      else log.append(el);
    }
    while (log.children.length > KEEP) log.firstElementChild?.remove();
    log.lastElementChild?.scrollIntoView({ block: "nearest" });
    refreshSoon();
  });
  const offEnded = ctx.rpc.on("groups.subscription_ended", (params) => {
    if (params.subscription === subscription) {
      const error = params.error as { message?: string } | undefined;
      status.textContent = `the live log ended${error?.message ? `: ${error.message}` : ""}`;
    }
  });

  void (async () => {
    try {
      await refresh();
      const s = await ctx.rpc.call<RoomState>("groups.state", { room_id: roomId });
      const answer = await ctx.rpc.call<{ subscription: string }>("groups.subscribe", {
        room_id: roomId,
        since_seq: Math.max(0, s.room.latest_seq - 100),
      });
      subscription = answer.subscription;
      if (stopped) void ctx.rpc.call("groups.unsubscribe", { subscription }).catch(() => undefined);
    } catch (err) {
      replace(status, errorBox(err));
    }
  })();

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    send.disabled = true;
    ctx.rpc
      .call("groups.send", { room_id: roomId, event_id: newEventId(), payload: { text } })
      .then(() => {
        input.value = "";
        status.textContent = "";
      })
      .catch(async (err) => {
        if (err instanceof RpcError && err.reason === "not_authority") {
          const lead = (err.data.authority as { gateway_id?: string } | undefined)?.gateway_id;
          const mesh = await ctx.rpc.call<MeshStatus>("mesh.status").catch(() => undefined);
          const there = mesh?.gateways.find((g) => g.gateway_id === lead)?.console_url;
          replace(
            status,
            `This gateway does not lead the room; ${lead ?? "its authority"} does. `,
            there ? h("a", { href: there }, `Open the console of ${lead}`) : null,
          );
        } else status.textContent = errorText(err);
      })
      .finally(() => {
        send.disabled = false;
      });
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      form.requestSubmit();
    }
  });

  return () => {
    stopped = true;
    offEvents();
    offEnded();
    if (refreshTimer) clearTimeout(refreshTimer);
    if (subscription) void ctx.rpc.call("groups.unsubscribe", { subscription }).catch(() => undefined);
  };
}
