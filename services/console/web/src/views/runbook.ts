import type { DivergenceBranch, MeshStatus, PromotePlan, RoomView } from "../api.js";
import { h, replace } from "../dom.js";
import { badge, type Ctx, errorBox, errorText, section } from "../ui.js";

/**
 * The operator runbook for one room on this gateway, with the CLI's safety checks: promote (the
 * coverage check and the fencing checklist, every item ticked), demote with the exact values of
 * the new claim, follow the new authority, and a divergence's branch with repost and release.
 * The gateway refuses what `hermes groups promote/demote/divergence` refuses; the page cannot do more.
 */
export function runbookView(root: HTMLElement, ctx: Ctx): () => void {
  const roomId = ctx.args[0];
  const picker = h("select", { id: "runbook-room", "aria-label": "Room" });
  picker.addEventListener("change", () => {
    location.hash = `#/runbook/${encodeURIComponent(picker.value)}`;
  });
  const body = h("div", { class: "runbook" });
  root.append(h("h1", null, "Runbook"), h("label", { for: "runbook-room" }, "Room "), picker, body);
  let stopped = false;

  const render = async () => {
    const { rooms } = await ctx.rpc.call<{ rooms: RoomView[] }>("groups.list", { limit: 500 });
    replace(
      picker,
      h("option", { value: "", disabled: true, selected: !roomId }, "Choose a room"),
      rooms.map((r) => h("option", { value: r.room_id, selected: r.room_id === roomId }, `${r.name} (${r.room_id})`)),
    );
    if (stopped) return;
    if (!roomId) {
      replace(
        body,
        h(
          "p",
          { class: "status" },
          rooms.length > 0
            ? "Choose a room to see what this gateway may do with it (promote, demote, follow, a divergence) and the checks each step needs."
            : "No rooms on this gateway.",
        ),
      );
      return;
    }
    const [plan, mesh] = await Promise.all([
      ctx.rpc.call<PromotePlan>("runbook.promote_plan", { room_id: roomId }),
      ctx.rpc.call<MeshStatus>("mesh.status", { fresh: true }),
    ]);
    const room = rooms.find((r) => r.room_id === roomId);
    if (stopped) return;
    replace(
      body,
      stateCard(plan, room),
      plan.role === "replica" || plan.safety_status === "fenced" ? promoteCard(ctx, plan, mesh, render) : null,
      plan.role === "authority" ? demoteCard(ctx, plan, room, mesh, render) : null,
      plan.role === "replica" ? followCard(ctx, plan, mesh, render) : null,
      await divergenceCard(ctx, plan, render),
    );
  };
  void render().catch((err) => replace(body, errorBox(err)));
  return () => {
    stopped = true;
  };
}

type Rerender = () => Promise<void>;

function stateCard(plan: PromotePlan, room: RoomView | undefined): HTMLElement {
  const rows: [string, string][] = [
    ["Role here", plan.role],
    ["Authority", `${plan.authority.gateway_id}@${plan.authority.epoch}`],
    ["Stored seq", String(plan.last_seq)],
    ["Authority's latest", String(plan.latest_seq)],
    ["Caught up", plan.caught_up ? "yes (as of the last page)" : "no"],
    ["Safety", plan.safety_reason ? `${plan.safety_status} (${plan.safety_reason})` : plan.safety_status],
    [
      "Following",
      plan.following
        ? `${plan.following.state} from ${plan.following.source}${plan.following.last_error ? ` (${plan.following.last_error})` : ""}`
        : "-",
    ],
  ];
  if (room?.fenced_by) rows.push(["Fenced by", `${room.fenced_by.gateway_id}@${room.fenced_by.epoch}`]);
  return section(
    `${room?.name ?? plan.room_id} on ${plan.gateway_id}`,
    h(
      "dl",
      { class: "facts", "data-card": "state" },
      rows.map(([k, v]) => [h("dt", null, k), h("dd", null, v)]),
    ),
  );
}

function outcome(): HTMLElement {
  return h("div", { class: "outcome", role: "status", "aria-live": "polite" });
}

function consoleOf(mesh: MeshStatus, gatewayId: string): string | null {
  return mesh.gateways.find((g) => g.gateway_id === gatewayId)?.console_url ?? null;
}

function promoteCard(ctx: Ctx, plan: PromotePlan, mesh: MeshStatus, rerender: Rerender): HTMLElement {
  const [title, ...steps] = plan.checklist;
  const boxes = steps.map((_step, i) =>
    h("input", { type: "checkbox", id: `check-${i + 1}`, "data-check": i + 1, "aria-describedby": `check-${i + 1}-text` }),
  );
  const allowIncomplete = h("input", { type: "checkbox", id: "allow-incomplete" });
  const reason = h("input", { id: "promote-reason", value: "planned-handover", maxlength: 200 });
  const button = h("button", { type: "submit", disabled: true }, `Promote ${plan.gateway_id}`);
  const result = outcome();
  const ready = () => boxes.every((b) => b.checked) && (!plan.coverage_refusal || allowIncomplete.checked);
  for (const b of [...boxes, allowIncomplete]) b.addEventListener("change", () => (button.disabled = !ready()));
  const form = h(
    "form",
    { class: "promote", "aria-labelledby": "promote-title" },
    h("p", { id: "promote-title" }, title ?? ""),
    h(
      "ol",
      { class: "checklist" },
      steps.map((step, i) =>
        h("li", null, boxes[i], " ", h("label", { for: `check-${i + 1}`, id: `check-${i + 1}-text` }, step.replace(/^\s*\d+\.\s*/, ""))),
      ),
    ),
    plan.coverage_refusal
      ? h(
          "p",
          { class: "warning" },
          h("span", { class: "coverage" }, plan.coverage_refusal),
          h("br"),
          allowIncomplete,
          " ",
          h("label", { for: "allow-incomplete" }, "Promote anyway and lose what never reached this replica (--allow-incomplete)"),
        )
      : h("p", { class: "ok-text" }, "Coverage: this replica is caught up."),
    h("label", { for: "promote-reason" }, "Reason "),
    reason,
    " ",
    button,
    result,
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (!ready()) return;
    button.disabled = true;
    ctx.rpc
      .call<{
        authority_gateway_id: string;
        authority_epoch: number;
        previous_gateway_id: string;
        previous_epoch: number;
        claim_seq: number;
        next: string;
      }>("runbook.promote", { room_id: plan.room_id, confirm: true, reason: reason.value, allow_incomplete: allowIncomplete.checked })
      .then((r) => {
        const old = consoleOf(mesh, r.previous_gateway_id);
        replace(
          result,
          h(
            "p",
            { class: "ok-text" },
            `Promoted: ${r.authority_gateway_id} leads ${plan.room_id} at epoch ${r.authority_epoch} (was ${r.previous_gateway_id}@${r.previous_epoch}); claimed at seq ${r.claim_seq}.`,
          ),
          h("p", null, `Next, on ${r.previous_gateway_id}: `, h("code", null, r.next)),
          old
            ? h("a", { href: `${old}#/runbook/${encodeURIComponent(plan.room_id)}` }, `Open the Runbook of ${r.previous_gateway_id}`)
            : null,
        );
        setTimeout(() => void rerender().catch(() => undefined), 1500);
      })
      .catch((err) => {
        replace(result, errorBox(err));
        button.disabled = !ready();
      });
  });
  return section("Promote this gateway", form);
}

function demoteCard(ctx: Ctx, plan: PromotePlan, room: RoomView | undefined, mesh: MeshStatus, rerender: Rerender): HTMLElement {
  const claim =
    room?.fenced_by ?? mesh.rooms.find((r) => r.room_id === plan.room_id && r.authority.gateway_id !== plan.gateway_id)?.authority;
  const gateway = h("input", { id: "demote-gateway", required: true, value: claim?.gateway_id ?? "" });
  const epoch = h("input", { id: "demote-epoch", type: "number", min: 1, required: true, value: claim?.epoch ?? "" });
  const button = h("button", { type: "submit" }, "Demote this gateway");
  const result = outcome();
  const form = h(
    "form",
    { class: "demote" },
    h(
      "p",
      null,
      claim
        ? `${claim.gateway_id}@${claim.epoch} claims this room. Use the exact values of its promote; never guess an epoch.`
        : "Give the exact values the new authority's promote printed; never guess an epoch.",
    ),
    h("label", { for: "demote-gateway" }, "New authority "),
    gateway,
    " ",
    h("label", { for: "demote-epoch" }, "its epoch "),
    epoch,
    " ",
    button,
    result,
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    button.disabled = true;
    ctx.rpc
      .call<{ authority_gateway_id: string; authority_epoch: number; idempotent: boolean }>("groups.demote", {
        room_id: plan.room_id,
        observed_gateway_id: gateway.value.trim(),
        observed_epoch: Number(epoch.value),
      })
      .then((r) => {
        replace(
          result,
          h(
            "p",
            { class: "ok-text" },
            r.idempotent
              ? `Already follows ${r.authority_gateway_id}@${r.authority_epoch}.`
              : `Demoted: ${plan.room_id} now follows ${r.authority_gateway_id}@${r.authority_epoch}.`,
          ),
        );
        setTimeout(() => void rerender().catch(() => undefined), 800);
      })
      .catch((err) => {
        replace(result, errorBox(err));
        button.disabled = false;
      });
  });
  return section(plan.safety_status === "fenced" ? "Demote (this gateway is fenced)" : "Demote this gateway", form);
}

function followCard(ctx: Ctx, plan: PromotePlan, mesh: MeshStatus, rerender: Rerender): HTMLElement {
  const peers = mesh.gateways.filter((g) => g.peer !== null && g.via !== "self");
  const lead = mesh.rooms.find((r) => r.room_id === plan.room_id)?.authority.gateway_id ?? plan.authority.gateway_id;
  const from = h(
    "select",
    { id: "follow-from" },
    peers.map((g) =>
      h(
        "option",
        { value: g.peer!, selected: g.gateway_id === lead },
        `${g.gateway_id}${g.gateway_id === lead ? " (leads the room)" : ""}`,
      ),
    ),
    h("option", { value: `relay://${lead}` }, `relay://${lead}`),
  );
  const button = h("button", { type: "submit" }, "Replicate and follow");
  const result = outcome();
  const form = h("form", { class: "follow" }, h("label", { for: "follow-from" }, "From "), from, " ", button, result);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    button.disabled = true;
    result.textContent = "replicating…";
    ctx.rpc
      .call<{ stored_seq: number; caught_up: boolean; divergences: unknown[] }>("groups.replicate", {
        room_id: plan.room_id,
        from: from.value,
        follow: true,
      })
      .then((r) => {
        replace(
          result,
          h("p", { class: "ok-text" }, `Stored up to seq ${r.stored_seq}, ${r.caught_up ? "caught up" : "not caught up"}, following.`),
          r.divergences.length > 0 ? h("p", { class: "warning" }, "DIVERGED: a branch was preserved (below).") : null,
        );
        setTimeout(() => void rerender().catch(() => undefined), 800);
      })
      .catch((err) => replace(result, errorBox(err)))
      .finally(() => {
        button.disabled = false;
      });
  });
  return section("Follow the authority", form);
}

async function divergenceCard(ctx: Ctx, plan: PromotePlan, rerender: Rerender): Promise<HTMLElement | null> {
  const { branches } = await ctx.rpc.call<{ branches: DivergenceBranch[] }>("groups.divergence", { room_id: plan.room_id });
  const release =
    plan.safety_status === "diverged" || plan.safety_status === "quarantined"
      ? h("button", { type: "button", class: "secondary" }, `Release the ${plan.safety_status} status`)
      : null;
  const result = outcome();
  release?.addEventListener("click", () => {
    ctx.rpc
      .call("groups.release", { room_id: plan.room_id })
      .then(() => rerender())
      .catch((err) => replace(result, errorBox(err)));
  });
  if (branches.length === 0 && !release) return null;
  const forms = branches.map((b) => {
    const messages = b.events.filter((e) => e.kind === "message.user" || e.kind === "message.member");
    const boxes = messages.map((e) => h("input", { type: "checkbox", value: e.seq, id: `repost-${b.divergence_id}-${e.seq}` }));
    const button = h("button", { type: "submit" }, "Repost the chosen messages");
    const form = h(
      "form",
      { class: "branch" },
      h(
        "p",
        null,
        `Branch ${b.divergence_id}: ${b.count} event(s) from seq ${b.from_seq} of ${b.branch_gateway_id}@${b.branch_epoch}; ${b.winning_gateway_id}@${b.winning_epoch} won.`,
        b.markers_only ? " (handover marker only)" : "",
      ),
      messages.length === 0
        ? h("p", null, "No messages to repost in this branch.")
        : h(
            "ul",
            null,
            messages.map((e, i) =>
              h(
                "li",
                null,
                boxes[i],
                " ",
                h(
                  "label",
                  { for: `repost-${b.divergence_id}-${e.seq}` },
                  `#${e.seq} ${e.actor.display_name ?? e.actor.id}: `,
                  String(e.payload.text ?? ""),
                ),
              ),
            ),
          ),
      messages.length > 0 ? button : null,
    );
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const seqs = boxes.filter((x) => x.checked).map((x) => Number(x.value));
      if (seqs.length === 0) return;
      ctx.rpc
        .call<{ items: { original_seq: number; idempotent: boolean; event: { seq: number } }[] }>("groups.repost", {
          room_id: plan.room_id,
          seqs,
          divergence_id: b.divergence_id,
        })
        .then((r) =>
          replace(
            result,
            h(
              "p",
              { class: "ok-text" },
              r.items.map((i) => `#${i.original_seq} → ${i.idempotent ? "already reposted as" : "reposted as"} seq ${i.event.seq}. `),
            ),
          ),
        )
        .catch((err) => replace(result, h("p", { class: "error" }, errorText(err))));
    });
    return form;
  });
  return section("Divergence", badge(plan.safety_status, plan.safety_status === "passive" ? "ok" : "bad"), forms, release, result);
}
