import type { Roster } from "../api.js";
import { h, replace } from "../dom.js";
import { type Ctx, errorText, time } from "../ui.js";

interface Message {
  role: string;
  content: string;
  created_at?: string;
}

/** One bot's canonical Bot Chat on this gateway: its recent history, a message, the reply. */
export function chatView(root: HTMLElement, ctx: Ctx): () => void {
  const profile = ctx.args[0];
  const picker = h("select", { id: "chat-bot", "aria-label": "Bot" });
  picker.addEventListener("change", () => {
    location.hash = `#/chat/${encodeURIComponent(picker.value)}`;
  });
  const log = h("ol", { class: "chat-log", "aria-live": "polite", "aria-label": "Conversation" });
  const input = h("textarea", { id: "chat-input", rows: 2, required: true, placeholder: "Message", "aria-label": "Message" });
  const send = h("button", { type: "submit" }, "Send");
  const status = h("p", { class: "status", role: "status" });
  const form = h("form", { class: "composer" }, input, send);
  let stopped = false;

  const bubble = (m: Message) =>
    h(
      "li",
      { class: `msg ${m.role}` },
      h("span", { class: "who" }, m.role === "user" ? "You" : m.role === "notification" ? "Notice" : (profile ?? "bot")),
      h("p", { class: "text" }, m.content),
      m.created_at ? h("time", null, time(m.created_at)) : null,
    );

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text || !profile) return;
    log.append(bubble({ role: "user", content: text }));
    input.value = "";
    send.disabled = true;
    status.textContent = `${profile} is answering…`;
    ctx.rpc
      .call<{ reply: string }>("bots.chat", { profile, text })
      .then((r) => {
        if (stopped) return;
        log.append(bubble({ role: "assistant", content: r.reply }));
        status.textContent = "";
      })
      .catch((err) => {
        if (!stopped) status.textContent = errorText(err);
      })
      .finally(() => {
        send.disabled = false;
        input.focus();
      });
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      form.requestSubmit();
    }
  });

  root.append(h("h1", null, "Bot Chat"), h("label", { for: "chat-bot" }, "Bot "), picker, status, log, form);
  void (async () => {
    try {
      const roster = await ctx.rpc.call<Roster>("bots.roster");
      const local = roster.bots.filter((b) => b.local);
      replace(
        picker,
        h("option", { value: "", disabled: true, selected: !profile }, "Choose a bot of this gateway"),
        local.map((b) => h("option", { value: b.handle, selected: b.handle === profile }, `${b.display_name || b.handle} (@${b.handle})`)),
      );
      if (!profile) {
        form.hidden = true;
        return;
      }
      const history = await ctx.rpc.call<{ messages: Message[] }>("bots.history", { profile, limit: 50 });
      if (!stopped) replace(log, history.messages.map(bubble));
    } catch (err) {
      status.textContent = errorText(err);
    }
  })();
  return () => {
    stopped = true;
  };
}
