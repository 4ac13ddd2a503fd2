// The dashboard in a real browser against a real one-box node running the root company:
// a person opens it, is refused with a wrong token, enters the right one, sees the four
// agent seats held, asks @ceo for a plan in #general, and watches the reply land in the
// thread and the work items appear. Needs Chromium at /usr/bin/chromium (Debian package
// `chromium`), driven by playwright-core.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { openBrowser, SEE_MS, seen, tableRows, watchProblems } from "./browser.ts";
import { parse } from "yaml";
import { makeFleet, TEST_TOKEN, type Fleet } from "../support/fleet.ts";

/** Where the final screenshot goes, for a person to look at after a run. */
const SCREENSHOT = process.env.CREWLET_DASHBOARD_SCREENSHOT ?? "/tmp/dashboard.png";

const rootCompany = (parse(readFileSync(resolve(import.meta.dir, "../../crewlet.yaml"), "utf8")) as { company: unknown }).company;
let fleet: Fleet | null = null;
let context: BrowserContext | null = null;
const profileDir = mkdtempSync(join(tmpdir(), "crewlet-chromium-"));

afterAll(async () => {
  await context?.close().catch(() => undefined);
  await fleet?.stop();
  rmSync(profileDir, { recursive: true, force: true });
});

/** Rows of the table captioned `caption`, each as its cells' text. */

/**
 * The <time> elements of a table: each must carry the absolute date and time on hover (a
 * title with the year, weekday and zone) and a machine-readable datetime; returns the titles.
 */
async function timeTitles(page: Page, caption: RegExp): Promise<string[]> {
  const table = page.locator("table", { has: page.locator("caption", { hasText: caption }) });
  const stamps = await table.locator("time").evaluateAll((ts) => ts.map((t) => [t.getAttribute("title") ?? "", t.getAttribute("datetime") ?? ""] as const));
  for (const [title, iso] of stamps) {
    expect(title).toMatch(/^\w{3}, \d{1,2} \w{3} \d{4}, \d\d:\d\d:\d\d \S+$/);
    expect(Number.isNaN(Date.parse(iso))).toBe(false);
  }
  return stamps.map(([t]) => t);
}

/** Each card of the org chart: handle, whether a person, state word, holder and open work lines. */
async function orgCards(page: Page) {
  return page.locator(".org-tree .seat-card").evaluateAll((els) =>
    els.map((e) => ({
      handle: e.getAttribute("data-handle") ?? "",
      human: e.classList.contains("human"),
      state: (e.querySelector(".seat-state")?.textContent ?? "").trim(),
      holder: [...e.querySelectorAll(".seat-line")].map((l) => l.textContent ?? "").find((t) => t.startsWith("on ") || t === "no holder") ?? null,
      open: [...e.querySelectorAll(".seat-line")].map((l) => l.textContent ?? "").find((t) => t.includes("open work")) ?? null,
      units: [...e.querySelectorAll(".seat-units .chip")].map((c) => c.textContent ?? ""),
    })),
  );
}

/** The handle of the card whose branch holds `handle`'s card, or null at the top. */
async function parentOf(page: Page, handle: string): Promise<string | null> {
  return page.locator(`.org-tree .seat-card[data-handle="${handle}"]`).evaluate((card) => {
    const li = card.parentElement?.parentElement?.closest("li");
    return li?.querySelector(":scope > .seat-card")?.getAttribute("data-handle") ?? null;
  });
}

const until = seen;

test("a person signs in, sees the fleet, asks @ceo for a plan and sees the reply and the work", async () => {
  fleet = await makeFleet({ nodes: [{ id: "node-1", kind: "member" }], company: rootCompany });
  const node = fleet.node("node-1");
  await node.start();
  await node.waitReady(60_000);

  const opened = await openBrowser(profileDir);
  context = opened.context;
  const page = opened.page;
  // A script error or a refused resource (the content policy) shows up here.
  const problems = watchProblems(page, { console: true });

  // "/" leads to the dashboard, which asks for the token and shows nothing else.
  await page.goto(`${node.apiUrl}/`);
  expect(new URL(page.url()).pathname).toBe("/dashboard");
  await page.getByLabel("API token", { exact: true }).waitFor({ state: "visible" });
  expect(await page.locator("#tabs").isVisible()).toBe(false);

  // A wrong token is refused with a message that says so.
  await page.getByLabel("API token", { exact: true }).fill("not-the-token-0000000000000");
  await page.getByRole("button", { name: "Open dashboard" }).click();
  await page.getByText("That token was not accepted").waitFor({ timeout: SEE_MS });
  expect(await page.locator("#tabs").isVisible()).toBe(false);
  problems.length = 0; // the browser logs the refused request itself

  await page.getByLabel("API token", { exact: true }).fill(TEST_TOKEN);
  await page.getByRole("button", { name: "Open dashboard" }).click();

  // Today is the landing view (test/e2e/dashboard-today.test.ts reads it); the org chart is
  // one tab away: the company as a tree by who manages whom, each agent seat a card with its
  // state, holder and open work; the founder shown as a person.
  await page.getByRole("heading", { name: "Today", level: 2 }).waitFor({ timeout: SEE_MS });
  await page.getByRole("link", { name: "Org", exact: true }).click();
  await page.getByRole("heading", { name: "Org chart", level: 2 }).waitFor({ timeout: SEE_MS });
  const cards = await until("five seat cards, the four agents held", async () => {
    const c = await orgCards(page);
    return c.length === 5 && c.filter((x) => x.holder === "on node-1").length === 4 ? c : null;
  });
  expect(cards.map((c) => c.handle).sort()).toEqual(["ceo", "cto", "engineer", "founder", "pm"]);
  const founder = cards.find((c) => c.handle === "founder")!;
  expect(founder.human).toBe(true);
  expect(founder.state).toBe("person");
  for (const c of cards.filter((x) => !x.human)) {
    expect(c.state).toBe("idle");
    expect(c.open).toBe("0 open work items");
  }
  // The tree: @ceo at the top, @cto and @pm under @ceo, @engineer under @cto.
  expect(await page.locator(".org-tree > li > .seat-card").evaluateAll((els) => els.map((e) => e.getAttribute("data-handle")))).toEqual(["ceo", "founder"]);
  expect(await parentOf(page, "cto")).toBe("ceo");
  expect(await parentOf(page, "pm")).toBe("ceo");
  expect(await parentOf(page, "engineer")).toBe("cto");
  expect(cards.find((c) => c.handle === "cto")!.units).toContain("leads Engineering");
  await page.screenshot({ path: SCREENSHOT.replace(/\.png$/, "-org.png"), fullPage: true });

  // Fleet: the one node, and the four agent seats held on it.
  await page.getByRole("link", { name: "Fleet" }).click();
  await page.getByRole("heading", { name: "Fleet", level: 2 }).waitFor({ timeout: SEE_MS });
  const leases = await until("four seat leases", async () => {
    const r = await tableRows(page, /Who holds each agent seat/);
    return r.length === 4 ? r : null;
  });
  expect(leases.map((r) => r[0]).sort()).toEqual(["@ceo", "@cto", "@engineer", "@pm"]);
  // Relative times in the text, the absolute date and time on hover (a <time> with a title).
  for (const r of leases) expect(r[1]).toMatch(/^node-1 · since (just now|\d+ min ago)$/);
  const leaseStamps = await timeTitles(page, /Who holds each agent seat/);
  expect(leaseStamps.length).toBe(4);
  // Operations: the duties, each with its holder and when it last ticked.
  const duties = await until("a duty held, with its last tick", async () => {
    const r = await tableRows(page, /Who runs each singleton duty/);
    return r.length > 0 && r.some((d) => d[2] !== "—") ? r : null;
  });
  for (const d of duties) {
    expect(d[1]).toMatch(/^node-1 · since (just now|\d+ min ago)$/);
    expect(d[2]).toMatch(/^(—|(just now|\d+ min ago) · \d+ ms)$/);
  }
  expect((await timeTitles(page, /Who runs each singleton duty/)).length).toBe(duties.length + duties.filter((d) => d[2] !== "—").length);
  const nodes = await tableRows(page, /^Nodes$/);
  expect(nodes.length).toBe(1);
  expect(nodes[0]![0]).toBe("node-1");
  expect(nodes[0]![5]).toBe("4");
  expect(await page.locator("#node").textContent()).toContain("node-1");
  await page.screenshot({ path: SCREENSHOT.replace(/\.png$/, "-fleet.png"), fullPage: true });

  // Agents: each held here and idle before anyone has asked anything.
  await page.getByRole("link", { name: "Agents" }).click();
  const agents = await until("four idle agents", async () => {
    const r = await tableRows(page, /Agent seats/);
    return r.length === 4 && r.every((a) => a[2] === "idle") ? r : null;
  });
  for (const a of agents) expect(a[1]).toMatch(/^node-1 · since (just now|\d+ min ago) · epoch \d+$/);
  expect((await timeTitles(page, /Agent seats/)).length).toBeGreaterThanOrEqual(4);
  await page.screenshot({ path: SCREENSHOT.replace(/\.png$/, "-agents.png"), fullPage: true });

  // A second tab watches the live event feed (its own sign-in: sessionStorage is per tab).
  const feed = await context.newPage();
  feed.on("pageerror", (err) => problems.push(`feed page error: ${err.message}`));
  await feed.goto(`${node.apiUrl}/dashboard#events`);
  await feed.getByLabel("API token", { exact: true }).fill(TEST_TOKEN);
  await feed.getByRole("button", { name: "Open dashboard" }).click();
  await feed.getByText("Live.", { exact: true }).waitFor({ timeout: SEE_MS });

  // Chat: post as @founder in #general.
  await page.getByRole("link", { name: "Chat" }).click();
  await page.getByRole("heading", { name: "#general" }).waitFor({ timeout: SEE_MS });
  expect(await page.getByLabel("Post as", { exact: true }).inputValue()).toBe("founder");
  await page.getByLabel("Message", { exact: true }).fill("@ceo please make a plan");
  await page.getByRole("button", { name: "Post" }).click();
  const asked = page.locator(".messages > li", { hasText: "@ceo please make a plan" });
  await asked.waitFor({ timeout: SEE_MS });
  expect(await asked.locator(".msg-head strong").first().textContent()).toBe("founder");
  // @ceo answers in the thread of the message.
  const reply = asked.locator(".thread li", { hasText: "On it" });
  await reply.waitFor({ timeout: SEE_MS });
  expect(await reply.locator(".msg-head strong").textContent()).toBe("ceo");
  expect(await page.getByLabel("Message", { exact: true }).inputValue()).toBe("");
  await page.screenshot({ path: SCREENSHOT.replace(/\.png$/, "-chat.png"), fullPage: true });

  // Work: an ENG item for @cto and an OPS item for @pm, picked up.
  await page.getByRole("link", { name: "Work" }).click();
  const work = await until("the ENG and OPS items in progress", async () => {
    const r = await tableRows(page, /work items/);
    const eng = r.find((w) => w[0]!.startsWith("ENG-") && w[3] === "@cto" && w[2] === "in progress");
    const ops = r.find((w) => w[0]!.startsWith("OPS-") && w[3] === "@pm" && w[2] === "in progress");
    return eng && ops ? { eng, ops } : null;
  });
  expect(work.eng[1]).toContain("Technical plan");
  expect(work.ops[1]).toContain("Delivery plan");

  // The ENG item's detail carries @cto's comment.
  await page.getByRole("link", { name: work.eng[0]! }).click();
  await page.getByRole("heading", { name: new RegExp(`^${work.eng[0]} · Technical plan`) }).waitFor({ timeout: SEE_MS });
  await page.locator(".comments li", { hasText: "Picked up by @cto" }).waitFor({ timeout: SEE_MS });
  const facts = await page.locator(".detail .chip").allTextContents();
  expect(facts).toContain("@cto");
  expect(facts).toContain("in progress");

  await page.screenshot({ path: SCREENSHOT, fullPage: true });

  // Back on the org chart the work shows on the cards: one open item each for @cto and @pm.
  await page.getByRole("link", { name: "Org", exact: true }).click();
  await until("open work on @cto's and @pm's cards", async () => {
    const c = await orgCards(page);
    const of = (h: string) => c.find((x) => x.handle === h)?.open;
    return of("cto") === "1 open work item" && of("pm") === "1 open work item" && of("ceo") === "0 open work items";
  });
  // At a phone's width the chart still fits the screen.
  await page.setViewportSize({ width: 390, height: 844 });
  expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(390);
  await page.screenshot({ path: SCREENSHOT.replace(/\.png$/, "-org-390.png"), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 900 });

  // A click on @cto's card opens its agent page: what the company file says, who holds it,
  // its tools, its open work and the turn it ran, with dates absolute on hover.
  await page.locator('.seat-card[data-handle="cto"]').click();
  await page.getByRole("heading", { name: "@cto", level: 2 }).waitFor({ timeout: SEE_MS });
  expect(new URL(page.url()).hash).toBe("#agent/cto");
  const cto = await until("@cto's facts with its tools", async () => {
    const f = await page.locator(".facts").evaluate((dl) => {
      const out: Record<string, string> = {};
      for (const dt of dl.querySelectorAll("dt")) out[dt.textContent ?? ""] = (dt.nextElementSibling?.textContent ?? "").trim();
      return out;
    }).catch(() => null);
    return f && f.Tools?.includes("work_create") ? f : null;
  });
  expect(cto.Goal).toBe("Own the technical roadmap and the engineering team.");
  expect(cto.Model).toBe("offline · scripted");
  expect(cto.Manager).toBe("@ceo");
  expect(cto.Reports).toBe("@engineer");
  expect(cto.Holder).toMatch(/^node-1 · epoch \d+ · since (just now|\d+ min ago)$/);
  expect(cto.State).toBe("idle");
  const hover = await page.locator(".facts time").first().getAttribute("title");
  expect(hover).toMatch(/\d{4}/); // the absolute date, year included
  const openWork = await tableRows(page, /Open work assigned to @cto/);
  expect(openWork.length).toBe(1);
  expect(openWork[0]![0]).toMatch(/^ENG-\d+$/);
  expect(openWork[0]![2]).toBe("in progress");
  const turns = await until("@cto's turn in its recent turns", async () => {
    const r = await tableRows(page, /Recent turns of @cto/);
    return r.length >= 1 ? r : null;
  });
  // Each turn as its holder recorded it: when (a link to its transcript), outcome, trigger.
  expect(turns[0]![1]).toBe("completed");
  expect(turns[0]![2]).toContain("from ceo");
  await page.screenshot({ path: SCREENSHOT.replace(/\.png$/, "-agent.png"), fullPage: true });
  // Its manager is one click away.
  await page.locator(".facts").getByRole("link", { name: "@ceo" }).click();
  await page.getByRole("heading", { name: "@ceo", level: 2 }).waitFor({ timeout: SEE_MS });

  // The feed saw @ceo's turn start, call its tools and complete, as it happened.
  const feedLines = await until("@ceo's turn in the event feed", async () => {
    const lines = await feed.locator(".feed .ev-text").allTextContents();
    return lines.some((l) => l.startsWith("ceo answered founder in #general")) ? lines : null;
  });
  expect(feedLines).toContain("ceo is answering founder in #general");
  expect(feedLines).toContain("ceo used work_create");
  await feed.screenshot({ path: SCREENSHOT.replace(/\.png$/, "-events.png"), fullPage: true });
  await feed.close();
  expect(problems).toEqual([]);

  // The token was only ever in this tab: forgetting it returns to the sign-in form.
  await page.getByRole("button", { name: "Forget token" }).click();
  await page.getByLabel("API token", { exact: true }).waitFor({ state: "visible" });
  expect(await page.evaluate(() => sessionStorage.getItem("crewlet.token"))).toBeNull();
}, 180_000);
