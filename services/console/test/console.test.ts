import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.js";
import { type Browser, launchBrowser, see, seeTitle } from "./support/browser.js";
import { type ConsoleMesh, HOSTILE, startConsoleMesh, TEST_KEY } from "./support/console-mesh.js";

/**
 * The web console in a real headless Chromium against `hermes up`'s mesh (three gateways and a
 * relay, in process): log in, the bots of the mesh, a Bot Chat turn, a room's live discussion, a
 * failed delivery's reason, the Mesh picture, a planned authority move done from the Runbook
 * views of both gateways, and the refusals (a wrong key, another origin, markup in names and
 * messages shown as text). Every view is saved as a screenshot under .ci/out/console/.
 */

let mesh: ConsoleMesh;
let browser: Browser;
let gw1: Page;

async function logIn(page: Page, gateway: string, key = TEST_KEY): Promise<void> {
  await page.goto(`${mesh.origin(gateway)}/`);
  await page.waitForURL(/\/login$/);
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Log in" }).click();
}

async function view(page: Page, hash: string): Promise<void> {
  await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
}

beforeAll(async () => {
  mesh = await startConsoleMesh();
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await mesh?.stop();
});

describe("the web console", () => {
  it("refuses a wrong key, then logs in with the right one", async () => {
    gw1 = await browser.newPage();
    await logIn(gw1, "gw-1", "wrong-key-0123456789abcdef");
    await see(gw1.getByRole("alert")).toHaveText("Wrong key.");
    expect(new URL(gw1.url()).pathname).toBe("/login");
    await browser.screenshot(gw1, "login-refused");
    await logIn(gw1, "gw-1");
    await see(gw1.locator("header .badge.gateway")).toHaveText("gw-1");
    const cookies = await browser.context.cookies(mesh.origin("gw-1"));
    expect(cookies.find((c) => c.name === "hermes_console_gw-1")).toMatchObject({ httpOnly: true, sameSite: "Strict" });
  });

  it("shows the demo bots of the 3-gateway mesh with their gateway badges, markup as text", async () => {
    await view(gw1, "#/bots");
    for (const [bot, gateway] of [
      ["alice", "gw-1"],
      ["bob", "gw-1"],
      ["carol", "gw-2"],
      ["dave", "gw-2"],
      ["erin", "gw-3"],
      ["frank", "gw-3"],
    ] as const) {
      await see(gw1.locator(`[data-bot="${bot}@${gateway}"] .badge.gateway`)).toHaveText(gateway);
    }
    await see(gw1.locator('[data-bot="alice@gw-1"] .bot-title')).toHaveText("Researcher");
    const mallory = gw1.locator('[data-bot="mallory@gw-1"]');
    await see(mallory.locator(".bot-name")).toHaveText(HOSTILE.displayName);
    await see(mallory.locator(".bot-title")).toHaveText(HOSTILE.title);
    expect(await mallory.locator("img, script").count()).toBe(0);
    // Bot Mode's metadata: each bot of this gateway has a hidden toggle, the other gateways' bots none.
    for (const bot of ["alice@gw-1", "bob@gw-1", "mallory@gw-1"]) {
      await see(gw1.locator(`[data-bot="${bot}"] input[type="checkbox"]`)).toHaveCount(1);
    }
    await see(gw1.locator('[data-bot="carol@gw-2"] input[type="checkbox"]')).toHaveCount(0);
    await browser.screenshot(gw1, "bots");
    // Hiding a bot stores it (profiles.update) and the roster leaves it out until "Show hidden bots".
    // click, not check(): the card is redrawn (and leaves the list) as soon as the change is stored.
    await mallory.locator('input[type="checkbox"]').click();
    await see(mallory).toHaveCount(0);
    await gw1.getByRole("button", { name: "Show hidden bots (1)" }).click();
    await see(mallory.locator('input[type="checkbox"]')).toHaveCount(1);
    expect(await mallory.locator('input[type="checkbox"]').isChecked()).toBe(true);
    expect(mesh.gw("gw-1").gateway.profiles.show("mallory").meta.hidden).toBe(true);
    await mallory.locator('input[type="checkbox"]').click();
    await eventually(() => expect(mesh.gw("gw-1").gateway.profiles.show("mallory").meta.hidden).toBe(false));
  });

  it("chats with a bot and shows its reply", async () => {
    await view(gw1, "#/chat/alice");
    await gw1.getByLabel("Message").fill("hello alice, who are you?");
    await gw1.getByRole("button", { name: "Send" }).click();
    await see(gw1.locator(".chat-log .msg.assistant").last()).toContainText(/\S/);
    const reply = await gw1.locator(".chat-log .msg.assistant").last().locator(".text").textContent();
    const stored = mesh.gw("gw-1").gateway.chat.botChatHistory("alice", 10);
    expect(stored.at(-1)).toMatchObject({ role: "assistant", content: reply });
    await browser.screenshot(gw1, "bot-chat");
  });

  it("shows the Bot Chat form only once a bot is chosen", async () => {
    await view(gw1, "#/chat");
    await see(gw1.locator("#chat-bot option[value=alice]")).toHaveCount(1);
    expect(await gw1.locator("form.composer").isVisible()).toBe(false);
    await gw1.locator("#chat-bot").selectOption("alice");
    await see(gw1.locator("form.composer")).toBeVisible();
  });

  it("sends in a room and shows the members' replies as they arrive", async () => {
    await view(gw1, "#/rooms/lobby");
    await see(gw1.locator(".room-title")).toHaveText("Lobby");
    for (const [member, gateway] of [
      ["alice", "gw-1"],
      ["carol", "gw-2"],
      ["erin", "gw-3"],
    ] as const) {
      await see(gw1.locator(".members li", { hasText: member }).locator(".badge.gateway")).toHaveText(gateway);
    }
    await gw1.getByLabel("Message").fill("Hello @all, say something");
    await gw1.getByRole("button", { name: "Send" }).click();
    await see(gw1.locator('.room-log [data-kind="message.user"]').last()).toContainText("Hello @all, say something");
    // Each member's reply arrives over the live subscription (the page is never reloaded).
    for (const member of ["alice", "carol", "erin"]) {
      await see(gw1.locator('.room-log [data-kind="message.member"]', { hasText: new RegExp(member, "i") }).first()).toBeVisible({
        timeout: 30_000,
      });
    }
    await browser.screenshot(gw1, "rooms");
  });

  it("shows markup in a room's name and messages as text", async () => {
    await view(gw1, "#/rooms/markup");
    await see(gw1.locator(".room-title")).toHaveText(HOSTILE.roomName);
    await gw1.getByLabel("Message").fill(HOSTILE.message);
    await gw1.getByRole("button", { name: "Send" }).click();
    await see(gw1.locator('.room-log [data-kind="message.user"] .text').last()).toHaveText(HOSTILE.message);
    expect(await gw1.locator("main img, main script, main b, main i").count()).toBe(0);
    expect(await gw1.evaluate("window.__pwned")).toBeUndefined();
    await browser.screenshot(gw1, "rooms-markup");
  });

  it("opens a failed delivery and shows its reason", async () => {
    const ack = await mesh.gw("gw-1").gateway.deliveries.send("alice", "bob", "please review the draft");
    await eventually(() => expect(mesh.gw("gw-1").gateway.deliveries.get(ack.delivery_id).state).toBe("failed"), { timeoutMs: 20_000 });
    await view(gw1, "#/deliveries");
    await gw1.locator("#filter-state").selectOption("failed");
    const row = gw1.locator(`tr[data-delivery="${ack.delivery_id}"]`);
    await see(row).toContainText("failed [missing_config]");
    await row.getByRole("link", { name: ack.delivery_id }).click();
    await see(gw1.locator('[data-field="reason"]')).toHaveText("missing_config");
    await see(gw1.locator('[data-field="error"]')).toContainText(/not-configured/);
    await browser.screenshot(gw1, "deliveries");
  });

  it("lists the A2A cards served and a task an A2A caller started", async () => {
    const gateway = mesh.gw("gw-1").gateway;
    const sent = await fetch(`http://${gateway.httpAddress}/a2a/alice/`, {
      method: "POST",
      headers: { authorization: `Bearer ${TEST_KEY}`, "content-type": "application/json", "a2a-version": "1.0" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "SendMessage",
        params: { message: { messageId: "console-a2a", role: "ROLE_USER", parts: [{ text: "hi" }] } },
      }),
    });
    const task = ((await sent.json()) as { result: { task: { id: string } } }).result.task;
    await view(gw1, "#/a2a");
    await see(gw1.locator('table.a2a-cards tr[data-profile="alice"]')).toContainText("/a2a/alice/.well-known/agent-card.json");
    await see(gw1.locator(`table.a2a-tasks tr[data-task="${task.id}"]`)).toContainText("completed");
    await browser.screenshot(gw1, "a2a");
  });

  it("draws the mesh: three gateways on the relay, gw-1 leading the lobby, each replica's lag", async () => {
    await view(gw1, "#/mesh");
    for (const g of ["gw-1", "gw-2", "gw-3"]) await see(gw1.locator(`svg [data-node="${g}"]`)).toBeVisible();
    await see(gw1.locator('svg [data-node="relay"]')).toContainText("connected");
    await see(gw1.locator('svg [data-node="gw-1"] .leads')).toContainText("lobby@1");
    await see(gw1.locator('[data-room="lobby"] tr[data-copy="gw-2"] [data-lag]')).toHaveText(/^\d+$/);
    await browser.screenshot(gw1, "mesh");
  });

  it("moves the lobby's authority from the Runbook views and the Mesh picture follows", async () => {
    const lobby = (name: string) => mesh.gw(name).gateway.rooms;
    // Quiesce: the discussion has settled and both replicas hold all of it.
    await eventually(() => expect(lobby("gw-1").state("lobby").driver_status).not.toBe("running"), { timeoutMs: 30_000 });
    await eventually(
      () =>
        expect(lobby("gw-2").replicaState("lobby")).toMatchObject({
          caught_up: true,
          last_seq: lobby("gw-1").replicaState("lobby").last_seq,
        }),
      { timeoutMs: 20_000 },
    );

    const gw2 = await browser.newPage();
    await logIn(gw2, "gw-2");
    await view(gw2, "#/runbook/lobby");
    const promote = gw2.getByRole("button", { name: "Promote gw-2" });
    await see(promote).toBeDisabled();
    await see(gw2.locator(".checklist li")).toHaveCount(4);
    await see(gw2.locator(".checklist")).toContainText("gw-1@1 cannot commit");
    await browser.screenshot(gw2, "runbook-promote");
    for (let i = 1; i <= 4; i++) {
      await gw2.locator(`#check-${i}`).check();
      if (i < 4) await see(promote).toBeDisabled();
    }
    await see(promote).toBeEnabled();
    await promote.click();
    await see(gw2.locator(".outcome")).toContainText("Promoted: gw-2 leads lobby at epoch 2", { timeout: 15_000 });
    await see(gw2.locator(".outcome code")).toHaveText("hermes groups demote lobby --observed-gateway gw-2 --observed-epoch 2");
    await browser.screenshot(gw2, "runbook-promoted");

    // The old authority learns of the claim and fences itself; its Runbook offers the demote with those values.
    await eventually(() => expect(lobby("gw-1").state("lobby").room.fenced_by).toEqual({ gateway_id: "gw-2", epoch: 2 }), {
      timeoutMs: 20_000,
    });
    await view(gw1, "#/mesh");
    await view(gw1, "#/runbook/lobby");
    await see(gw1.locator("#demote-gateway")).toHaveValue("gw-2");
    await see(gw1.locator("#demote-epoch")).toHaveValue("2");
    await gw1.getByRole("button", { name: "Demote this gateway" }).click();
    await see(gw1.locator(".demote .outcome")).toContainText("Demoted: lobby now follows gw-2@2");
    await see(gw1.getByRole("button", { name: "Replicate and follow" })).toBeVisible({ timeout: 10_000 });
    await gw1.getByRole("button", { name: "Replicate and follow" }).click();
    await see(gw1.locator(".follow .outcome")).toContainText("following", { timeout: 20_000 });
    await browser.screenshot(gw1, "runbook-demoted");

    await view(gw1, "#/mesh");
    await see(gw1.locator('svg [data-node="gw-2"] .leads')).toContainText("lobby@2", { timeout: 15_000 });
    await see(gw1.locator('svg [data-node="gw-1"] .leads')).toHaveText(/^(?!.*lobby@).*$/);
    await browser.screenshot(gw1, "mesh-after-move");
    expect(lobby("gw-1").replicaState("lobby")).toMatchObject({ role: "replica", authority: { gateway_id: "gw-2", epoch: 2 } });
    await gw2.close();
  });

  it("is usable by keyboard and on a phone-sized screen", async () => {
    const phone = await browser.newPage({ width: 375, height: 740 });
    await phone.goto(`${mesh.origin("gw-1")}/#/bots`);
    await see(phone.locator('[data-bot="alice@gw-1"]')).toBeVisible();
    const overflow = await phone.evaluate<number>("document.documentElement.scrollWidth - document.documentElement.clientWidth");
    expect(overflow).toBeLessThanOrEqual(0);
    await browser.screenshot(phone, "bots-phone");
    // Tab through the page to the Deliveries link and open it with Enter.
    let focused = "";
    for (let i = 0; i < 12 && focused !== "Deliveries"; i++) {
      await phone.keyboard.press("Tab");
      focused = await phone.evaluate<string>('document.activeElement?.textContent ?? ""');
    }
    expect(focused).toBe("Deliveries");
    await phone.keyboard.press("Enter");
    await phone.waitForURL(/#\/deliveries$/);
    await see(phone.locator("h1")).toHaveText("Deliveries");
    await browser.screenshot(phone, "deliveries-phone");
    await phone.close();
  });

  it("refuses a page of another origin, although the browser sends the cookie along", async () => {
    // Another port on the same host is the same site: the SameSite=Strict cookie goes with its
    // requests, so the gateway's Origin check is what stops it.
    const target = mesh.origin("gw-1");
    const evil: Server = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end(`<!doctype html><title>evil</title><body><script>
        const ws = new WebSocket(${JSON.stringify(target.replace("http", "ws"))} + "/rpc");
        ws.onopen = () => { ws.send(JSON.stringify({jsonrpc: "2.0", id: 1, method: "bots.roster"})); document.title = "socket opened"; };
        ws.onmessage = (e) => { document.title = "answered: " + e.data.slice(0, 40); };
        ws.onclose = () => { if (document.title === "evil") document.title = "socket refused"; };
        fetch(${JSON.stringify(target)} + "/logout", { method: "POST", mode: "no-cors", credentials: "include" })
          .catch(() => undefined).then(() => { document.body.dataset.logout = "sent"; });
      </script>`);
    });
    await new Promise<void>((r) => evil.listen(0, "127.0.0.1", r));
    try {
      const page = await browser.newPage();
      await page.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
      await seeTitle(page, "socket refused");
      await see(page.locator("body")).toHaveAttribute("data-logout", "sent");
      await page.close();
      // The cross-origin logout did nothing: the console still works.
      await view(gw1, "#/bots");
      await gw1.reload();
      await see(gw1.locator('[data-bot="alice@gw-1"]')).toBeVisible();
    } finally {
      evil.closeAllConnections();
      await new Promise<void>((r) => evil.close(() => r()));
    }
    expect(browser.errors).toEqual([]);
  });
});
