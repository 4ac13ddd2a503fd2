// The dashboard's browser tests share one way to open Chromium, wait for what a person
// would see, read a table and check a view (screenshot, axe-core, 390 px). Needs Chromium at
// /usr/bin/chromium (Debian package `chromium`), driven by playwright-core.
import { expect } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";
/** Generous: the dashboard's refresh loop runs every 3 s and CI boxes are shared. */
export const SEE_MS = 30_000;
const AXE = readFileSync(resolve(import.meta.dir, "../../node_modules/axe-core/axe.min.js"), "utf8");
const WIDE = { width: 1280, height: 900 };
const PHONE = { width: 390, height: 844 };

/** A headless Chromium on its own profile, and its first page. */
export async function openBrowser(profileDir: string): Promise<{ context: BrowserContext; page: Page }> {
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: WIDE,
  });
  return { context, page: context.pages()[0] ?? (await context.newPage()) };
}

/** What went wrong in the page: script errors, and (with `console`) console errors. */
export function watchProblems(page: Page, opts: { console?: boolean; expected503?: RegExp } = {}): string[] {
  const problems: string[] = [];
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  if (opts.console) {
    page.on("console", (msg) => {
      if (msg.type() !== "error") return;
      // A route that answers 503 by design (a holder's memory read that is unavailable, which
      // the page shows in words) still makes Chromium log the load as failed.
      const expected = opts.expected503 && /status of 503/.test(msg.text()) && opts.expected503.test(msg.location().url);
      if (!expected) problems.push(`console: ${msg.text()} (${msg.location().url})`);
    });
  }
  return problems;
}

/**
 * Polls until `check` returns a value, or throws naming what the dashboard did not show.
 * `tolerant`: a check that throws (an element not there yet) counts as not yet.
 */
export async function seen<T>(what: string, check: () => Promise<T | null | undefined | false>, opts: { every_ms?: number; tolerant?: boolean } = {}): Promise<T> {
  const deadline = Date.now() + SEE_MS;
  for (;;) {
    const v = await (opts.tolerant ? check().catch(() => null) : check());
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`the dashboard did not show ${what} within ${SEE_MS} ms`);
    await Bun.sleep(opts.every_ms ?? 200);
  }
}

/** The cells of the table captioned `caption`, row by row. */
export async function tableRows(page: Page, caption: RegExp): Promise<string[][]> {
  const table = page.locator("table", { has: page.locator("caption", { hasText: caption }) });
  return table.locator("tbody tr").evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll("th, td")].map((c) => (c.textContent ?? "").trim())));
}

/** A view checked as every view is: a screenshot, axe-core (no serious or critical
 * violations), and no sideways scroll at a phone's 390 px (screenshotted too). */
export async function checkView(page: Page, name: string, shotPath: (name: string) => string): Promise<void> {
  await page.screenshot({ path: shotPath(name), fullPage: true });
  // Evaluated through the devtools protocol, which the content policy does not govern; a
  // string, run in the page (this file is typed for bun, not the DOM).
  await page.evaluate(AXE);
  const found = await page.evaluate<string[]>(`(async () => {
    const r = await axe.run(document, { resultTypes: ["violations"] });
    return r.violations
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .map((v) => v.id + " (" + v.impact + "): " + v.help + " — " + v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", "));
  })()`);
  expect({ view: name, violations: found }).toEqual({ view: name, violations: [] });
  await page.setViewportSize(PHONE);
  await Bun.sleep(100);
  expect({ view: name, width: await page.evaluate<number>("document.documentElement.scrollWidth") }).toEqual({ view: name, width: PHONE.width });
  await page.screenshot({ path: shotPath(`${name}-390`), fullPage: true });
  await page.setViewportSize(WIDE);
}
