import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type BrowserContext, chromium, type Locator, type Page } from "playwright-core";
import { eventually } from "../../../../test/support/eventually.js";

/** Debian's Chromium, installed by scripts/ensure-chromium.sh (npm never downloads a browser here). */
export const CHROMIUM = "/usr/bin/chromium";

/** Where the screenshots of each view go (a CI artifact; .ci/ is not committed). */
export const SCREENSHOTS = fileURLToPath(new URL("../../../../.ci/out/console/", import.meta.url));

export interface Browser {
  context: BrowserContext;
  /** JavaScript errors the pages threw. */
  errors: string[];
  newPage(viewport?: { width: number; height: number }): Promise<Page>;
  screenshot(page: Page, name: string): Promise<string>;
  close(): Promise<void>;
}

/** A real headless Chromium with a fresh profile (user-data-dir), no network but loopback in use. */
export async function launchBrowser(): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), "hermes-chromium-"));
  mkdirSync(SCREENSHOTS, { recursive: true });
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
      "--disable-sync",
    ],
    viewport: { width: 1280, height: 860 },
  });
  const errors: string[] = [];
  context.on("weberror", (e) => errors.push(e.error().message));
  for (const p of context.pages()) await p.close();
  return {
    context,
    errors,
    async newPage(viewport) {
      const page = await context.newPage();
      if (viewport) await page.setViewportSize(viewport);
      return page;
    },
    async screenshot(page, name) {
      const path = join(SCREENSHOTS, `${name}.png`);
      await page.screenshot({ path, fullPage: true });
      return path;
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** How long a `see(…)` assertion waits for the page to get there (it polls; nothing sleeps). */
const SEE_TIMEOUT_MS = 15_000;

function matches(actual: string, expected: string | RegExp, whole: boolean): boolean {
  if (typeof expected !== "string") return expected.test(actual);
  return whole ? actual === expected : actual.includes(expected);
}

/** Waits (the shared polling helper) until `check` holds; when the time is up, says what was awaited. */
async function until(what: () => string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  await eventually(
    async () => {
      if (!(await check().catch(() => false))) throw new Error(what());
    },
    { timeoutMs, intervalMs: 50 },
  );
}

/**
 * Waiting assertions on what the page shows (the subset of Playwright Test's `expect` these tests
 * use; playwright-core has none): each polls until it holds or fails after a timeout.
 */
export function see(target: Locator, timeoutMs = SEE_TIMEOUT_MS) {
  const quick = { timeout: 500 };
  let last = "";
  const text = async () => {
    last = (await target.first().textContent(quick)) ?? "";
    return last;
  };
  const value = async (read: () => Promise<string | null>, expected: string) => {
    last = (await read()) ?? "";
    return last === expected;
  };
  const check = (describe: string, fn: () => Promise<boolean>, ms = timeoutMs) =>
    until(() => `${target} ${describe} (last: ${JSON.stringify(last)})`, fn, ms);
  return {
    toHaveText: (expected: string | RegExp, o: { timeout?: number } = {}) =>
      check(`to have text ${expected}`, async () => matches((await text()).trim(), expected, true), o.timeout),
    toContainText: (expected: string | RegExp, o: { timeout?: number } = {}) =>
      check(`to contain ${expected}`, async () => matches(await text(), expected, false), o.timeout),
    toBeVisible: (o: { timeout?: number } = {}) => check("to be visible", () => target.first().isVisible(), o.timeout),
    toBeDisabled: () => check("to be disabled", () => target.isDisabled(quick)),
    toBeEnabled: () => check("to be enabled", () => target.isEnabled(quick)),
    toHaveCount: (n: number) => check(`to count ${n}`, async () => (await target.count()) === n),
    toHaveValue: (v: string) => check(`to have value ${v}`, () => value(() => target.inputValue(quick), v)),
    toHaveAttribute: (name: string, v: string) => check(`to have ${name}=${v}`, () => value(() => target.getAttribute(name, quick), v)),
  };
}

/** Waits until the page's title is `title`. */
export function seeTitle(page: Page, title: string, timeoutMs = SEE_TIMEOUT_MS): Promise<void> {
  let last = "";
  const read = async () => {
    last = await page.title();
    return last === title;
  };
  return until(() => `title ${JSON.stringify(title)} (last: ${JSON.stringify(last)})`, read, timeoutMs);
}
