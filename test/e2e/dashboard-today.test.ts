// The Today view, in headless Chromium, like a person would read it: a company runs a
// scripted day of work on one box and the landing page answers "what requires my
// approval?" (the coding run parked on a question, at the top) and "what did my agents do
// today, and what did it cost?" (a receipt per turn: the founder's asks, @cto's work item,
// @analyst's priced answer, @pm's refused key in words; the day's total in money), calls
// out what is stuck (the dead letter of @pm's refused turn, a work item in progress that no
// turn moved for the company's one-minute limit), shows the week per agent beside the Spend
// chart, and every link is reachable by keyboard. No console errors; axe-core and 390 px
// as every view. Needs Chromium at /usr/bin/chromium and bubblewrap at /usr/bin/bwrap.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { checkView, openBrowser, SEE_MS, seen, watchProblems } from "./browser.ts";
import { makeFleet, TEST_TOKEN, type Fleet } from "../support/fleet.ts";
import { openAiTextReply, startModelServer, type ModelServer } from "../agent/model-server.ts";

const FAKE_CLI = resolve(import.meta.dir, "../support/fake-coding-cli.sh");
const ASK_TASK = "ask:Which colour?;write:colour.txt=$ANSWER;commit:paint;print:painted";
const SHOTS = process.env.CREWLET_DASHBOARD_SCREENSHOT_DIR ?? "/tmp";
const shot = (name: string) => join(SHOTS, `dashboard-${name}.png`);

let fleet: Fleet | null = null;
let context: BrowserContext | null = null;
const servers: ModelServer[] = [];
const profileDir = mkdtempSync(join(tmpdir(), "crewlet-chromium-"));

afterAll(async () => {
  await context?.close().catch(() => undefined);
  await fleet?.stop();
  for (const s of servers) s.stop();
  rmSync(profileDir, { recursive: true, force: true });
});

const until = <T>(what: string, check: () => Promise<T | null | undefined | false>) => seen(what, check, { tolerant: true });
/** Longer than SEE_MS: the stuck rule's minute has to pass. */
async function within<T>(what: string, ms: number, check: () => Promise<T | null | undefined | false>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check().catch(() => null);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`the dashboard did not show ${what} within ${ms} ms`);
    await Bun.sleep(500);
  }
}

test("Today answers what waits on me, what my agents did and what it cost, and what is stuck", async () => {
  const priced = startModelServer();
  priced.script([openAiTextReply("The numbers are up 4% this week.")]);
  const refusing = startModelServer();
  refusing.script([{ status: 401, json: { error: { message: "Incorrect API key provided", type: "invalid_request_error" } } }]);
  servers.push(priced, refusing);
  const company = {
    name: "Day Co",
    providers: {
      sandbox: { type: "local", engines: { fake: { command: ["/bin/sh", FAKE_CLI, "{task}"] } } },
      llm: {
        s: {
          type: "scripted",
          rules: [
            { when: { trigger: "sandbox_run" }, reply: "Run report: {{text}}" },
            { when: { seat: "engineer", text: "(?i)ask me" }, tool_calls: [{ tool: "run_sandbox", args: { task: ASK_TASK } }], reply: "Started the painting." },
            {
              when: { seat: "cto", text: "(?i)plan the launch" },
              tool_calls: [{ tool: "work_create", args: { project: "GEN", title: "Launch plan", body: "Dates, owners, risks.", assignee: "cto" } }],
              reply: "Planned the launch in a work item.",
            },
            { when: { seat: "cto", text: "(?i)announce the launch" }, tool_calls: [{ tool: "chat_post", args: { channel: "general", body: "We launch on Monday." } }], reply: "Asked to announce the launch." },
            { when: {}, reply: "ok" },
          ],
        },
        priced: { type: "openai", base_url: priced.url, model: "m", api_keys: ["sk-priced-0000"], pricing: { input_per_million: 1000, output_per_million: 2000 } },
        refusing: { type: "openai", base_url: refusing.url, model: "m", api_keys: ["sk-refused-0000"] },
      },
    },
    default_llm: "s",
    today: { stuck_after_minutes: 1 },
    approvals: { rules: [{ name: "Announcements", tools: ["chat_post"], seats: ["cto"] }] },
    roles: [
      { name: "CTO", handle: "cto" },
      { name: "Engineer", handle: "engineer", sandbox: { engines: ["fake"] } },
      { name: "Analyst", handle: "analyst", llm: "priced" },
      { name: "PM", handle: "pm", llm: "refusing" },
      { name: "Designer", handle: "designer" },
      { name: "Founder", handle: "founder", kind: "human" },
    ],
  };
  fleet = await makeFleet({ nodes: [{ id: "node-1", kind: "member" }], company });
  const node = fleet.node("node-1");
  await node.start();
  await node.waitReady(60_000);

  // The day's work, asked through the API as any client would.
  const post = async (body: string) => expect((await node.post("/chat/channels/general/messages", { body, author: "founder" })).status).toBeLessThan(300);
  const wip = await node.post("/work", { project: "GEN", title: "Migrate the billing jobs", status: "in_progress", assignee: "engineer" });
  expect(wip.status).toBe(200);
  const wipKey = ((await wip.json()) as { key: string }).key;
  await post("@cto please plan the launch");
  await post("@engineer please ask me which colour to paint");
  await post("@analyst what are the numbers?");
  await post("@pm status?");
  await post("@cto please announce the launch");

  const opened = await openBrowser(profileDir);
  context = opened.context;
  const page = opened.page;
  const problems = watchProblems(page, { console: true });
  await page.goto(`${node.apiUrl}/`);
  await page.getByLabel("API token", { exact: true }).fill(TEST_TOKEN);
  await page.getByRole("button", { name: "Open dashboard" }).click();
  // The landing page is Today.
  await page.getByRole("heading", { name: "Today", level: 2 }).waitFor({ timeout: SEE_MS });
  expect(await page.locator('#tabs a[aria-current="page"]').textContent()).toBe("Today");

  // "What requires my approval?": the parked run's question, in the first section.
  const waiting = page.locator("section.today-part", { has: page.getByRole("heading", { name: "Waiting on you", level: 3 }) });
  const parked = waiting.locator("li.parked-run");
  await until("the parked run waiting on the founder", async () => (await parked.count()) === 1);
  expect(await parked.locator(".run-question-text").textContent()).toBe("Which colour?");
  expect(await parked.textContent()).toContain("For founder in #general; a reply there mentioning @engineer answers it.");
  // …and @cto's announcement, parked for a person's yes under the company's rule, first.
  const approval = waiting.locator("li.approval");
  await until("the approval waiting on the founder", async () => (await approval.count()) === 1);
  expect(await approval.textContent()).toContain("@cto asks to use chat_post");
  expect(await approval.textContent()).toContain("We launch on Monday.");
  expect(await approval.textContent()).toContain("Rule: Announcements");
  expect(await approval.getByRole("link", { name: "Decide on @cto's chat_post request" }).getAttribute("href")).toBe("#approvals");
  expect(await waiting.locator("li.waiting-item").evaluateAll((els) => els.map((e) => e.className))).toEqual(["waiting-item approval", "waiting-item parked-run"]);
  const sections = await page.locator(".today > section h3").allTextContents();
  expect(sections[0]).toBe("Waiting on you");

  // "What did my agents do today, and what did it cost?": a receipt per turn.
  const agent = (h: string) => page.locator(`article.today-agent[data-seat="${h}"]`);
  const analyst = agent("analyst").locator("li.receipt").first();
  await until("@analyst's priced receipt", async () => (await analyst.locator(".receipt-summary").textContent()) === "The numbers are up 4% this week.");
  // 11 tokens in at 1,000 per million and 7 out at 2,000: 0.0250.
  expect(await analyst.locator(".receipt-facts").textContent()).toMatch(/^Tools: no tools · 11 tokens in \/ 7 out · cost 0\.0250 · took /);
  expect(await analyst.locator(".receipt-trigger").textContent()).toBe("founder mentioned it in #general");
  expect(await analyst.locator(".receipt-head .badge").textContent()).toBe("completed");

  const cto = agent("cto").locator("li.receipt", { hasText: "Planned the launch in a work item." });
  await until("@cto's receipt with its work item", async () => (await cto.count()) === 1);
  expect(await cto.locator(".receipt-facts").textContent()).toContain("Tools: work_create · ");
  expect(await cto.locator(".receipt-facts").textContent()).toContain("cost unpriced");
  const ctoWork = cto.getByRole("link", { name: /^Work item GEN-\d+$/ });
  expect(await ctoWork.count()).toBe(1);
  expect(await cto.getByRole("link", { name: /^Thread in #general \(@cto's turn at \d\d:\d\d\)$/ }).getAttribute("href")).toBe("#chat/general");

  const pm = agent("pm").locator("li.receipt").first();
  await until("@pm's failed receipt", async () => (await pm.getAttribute("data-outcome")) === "failed");
  expect(await pm.locator(".receipt-error").textContent()).toBe("Why: my model endpoint refused the API key (401) — check providers.llm.refusing.api_keys");
  expect(await pm.locator(".receipt-head .badge").textContent()).toBe("failed");
  expect(await page.content()).not.toContain("sk-refused-0000");

  // The engineer's turn on the work in progress links its work item.
  await until("@engineer's receipt on the work in progress", async () => (await agent("engineer").getByRole("link", { name: `Work item ${wipKey}` }).count()) >= 1);

  // An agent that ran nothing today is named once, not given an empty section.
  expect(await page.locator(".idle-agents").textContent()).toBe("No turns today: @designer.");
  expect(await agent("designer").count()).toBe(0);

  // The day's total, in money for what is priced.
  const total = await until("the day's total", async () => {
    const t = await page.locator(".today-total").textContent();
    return t && /cost 0\.0250 \(\d+ turns? unpriced\)/.test(t) ? t : null;
  });
  expect(total).toMatch(/\d+ turns · \d[\d,]* tokens in \/ \d[\d,]* out · cost 0\.0250/);
  expect(total).toContain("did not finish");

  // Stuck: @pm's refused turn is a dead letter; the work in progress goes quiet past a minute.
  const stuck = page.locator("section.today-part", { has: page.getByRole("heading", { name: "Stuck", level: 3 }) });
  await within("the dead letter", 60_000, async () => (await stuck.locator("li.stuck-dead").textContent())?.startsWith("1 dead letter"));
  await within("the quiet work item", 150_000, async () => (await stuck.locator(`li.stuck-work[data-work="${wipKey}"]`).textContent())?.includes("@engineer, in progress, quiet for"));
  expect(await stuck.textContent()).toContain("Work counts as stuck after 1 minute with no turn on it");
  // Nothing unset printed as words (a null child reads "null").
  expect(await waiting.textContent()).not.toContain("null");
  expect(await stuck.textContent()).not.toContain("null");

  // The week per agent: today's column counts @cto's turn.
  const cell = page.locator('.week-chart .week-cell[data-seat="cto"]').last();
  expect(Number(await cell.getAttribute("data-turns"))).toBeGreaterThanOrEqual(1);
  expect(Number(await page.locator('.week-chart .week-cell[data-seat="pm"]').last().getAttribute("data-trouble"))).toBeGreaterThanOrEqual(1);
  await checkView(page, "today", shot);

  // Keyboard: from the view's top, Tab reaches the parked run's "Answer in #general", and
  // Enter opens the thread's channel.
  await page.locator("#main").focus();
  const focused = (p: Page) => p.evaluate<string>("document.activeElement?.textContent ?? ''");
  let reached = false;
  for (let i = 0; i < 40 && !reached; i++) {
    await page.keyboard.press("Tab");
    reached = (await focused(page)) === "Answer in #general";
  }
  expect(reached).toBe(true);
  // The view refreshes every 3 s; the person's place on the page stays where it was.
  await Bun.sleep(3_500);
  expect(await focused(page)).toBe("Answer in #general");
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "#general" }).waitFor({ timeout: SEE_MS });
  await page.goBack();
  await page.getByRole("heading", { name: "Today", level: 2 }).waitFor({ timeout: SEE_MS });
  // …and a receipt's transcript link, by keyboard too.
  const transcript = agent("analyst").getByRole("link", { name: /^Transcript of @analyst's turn/ }).first();
  await transcript.focus();
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Turn of @analyst", level: 2 }).waitFor({ timeout: SEE_MS });

  // Beside the Spend chart: the same week per agent.
  await page.getByRole("link", { name: "Spend" }).click();
  await page.getByRole("heading", { name: "Turns per agent this week", level: 3 }).waitFor({ timeout: SEE_MS });
  await until("the week chart on Spend", async () => Number(await page.locator('.week-chart .week-cell[data-seat="analyst"]').last().getAttribute("data-turns")) >= 1);

  expect(problems).toEqual([]);
}, 300_000);
