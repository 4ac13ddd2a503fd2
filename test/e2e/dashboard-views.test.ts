// The dashboard's live chat, events backlog, operations views, work board and knowledge
// browser in a real browser against the compiled binary running the root company (plus a
// schedule, and @engineer on a local model endpoint written here so its turn can be slow
// and then fail). A person watches "working…" while a turn runs and the reply land without
// any polling; sees the failure marker with its reason; opens Events after the fact and
// reads sentences; compares two company revisions and rolls back with confirmation; sees
// the schedule; requeues and discards dead letters; pages the audit log; sees work as a
// board; browses the knowledge base, where a page carrying a script injection renders
// inert. Each view: a screenshot, an axe-core run (no serious or critical violations), and
// a check that it fits a 390 px screen. Needs Chromium at /usr/bin/chromium.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { connect, headers as natsHeaders } from "nats";
import type { BrowserContext, Page } from "playwright-core";
import { checkView, openBrowser, SEE_MS, seen, tableRows, watchProblems } from "./browser.ts";
import { parse } from "yaml";
import { buildArch } from "../../build.ts";
import { hostArch } from "../../src/broker/elf.ts";
import { deadLetterCopy } from "../../src/queue/deadletter.ts";
import { openAiTextReply, startModelServer, type ModelServer } from "../agent/model-server.ts";
import { makeFleet, TEST_TOKEN, type Fleet } from "../support/fleet.ts";
import { api, askCeoForAPlan } from "./support.ts";

const SHOTS = process.env.CREWLET_DASHBOARD_SCREENSHOT_DIR ?? "/tmp";

const rootCompany = (parse(readFileSync(resolve(import.meta.dir, "../../crewlet.yaml"), "utf8")) as { company: any }).company;
const until = <T>(what: string, check: () => Promise<T | null | undefined | false>) => seen(what, check, { every_ms: 100 });
const shot = (name: string) => join(SHOTS, `dashboard-${name}.png`);
let fleet: Fleet | null = null;
let context: BrowserContext | null = null;
let server: ModelServer | null = null;
const profileDir = mkdtempSync(join(tmpdir(), "crewlet-chromium-"));
const binDir = mkdtempSync(join(tmpdir(), "crewlet-bin-"));

afterAll(async () => {
  await context?.close().catch(() => undefined);
  await fleet?.stop();
  server?.stop();
  rmSync(profileDir, { recursive: true, force: true });
  rmSync(binDir, { recursive: true, force: true });
});





test("live chat, events backlog, operations, work board and knowledge, each as a person uses it", async () => {
  server = startModelServer();
  // @engineer's first answer takes 5 s (long enough to watch "working…" on a loaded box), then its key is refused.
  server.script([{ ...openAiTextReply("Tests are green."), delay_ms: 5_000 }, { status: 401, json: { error: { message: "Incorrect API key provided", type: "invalid_request_error" } } }]);
  const company = structuredClone(rootCompany);
  company.providers.llm.endpoint = { type: "openai", base_url: server.url, model: "m", api_keys: ["sk-views-0123456789"] };
  company.roles.find((r: any) => r.handle === "engineer").llm = "endpoint";
  company.schedules = [{ id: "standup", cron: "0 9 * * 1-5", seat: "pm", prompt: "Post the standup." }];
  // The compiled binary, as shipped: the dashboard's assets and libraries are embedded in it.
  const built = buildArch(hostArch(), resolve(import.meta.dir, "../../src/main.ts"), { outDir: binDir });
  fleet = await makeFleet({ nodes: [{ id: "node-1", kind: "member" }], company, binary: built.path });
  const node = fleet.node("node-1");
  await node.start();
  await node.waitReady(60_000);
  const url = node.apiUrl;

  // What happened before anyone opened the dashboard: @ceo's plan, work picked up.
  await askCeoForAPlan(url);

  const opened = await openBrowser(profileDir);
  context = opened.context;
  const page = opened.page;
  const problems = watchProblems(page);
  // While the injected page renders, the browser reports what its content policy refused
  // (the sanitizer parses the page's HTML to clean it): the second wall, kept apart.
  let injecting = false;
  let restarting = false;
  const refused: string[] = [];
  page.on("console", (msg) => {
    if (msg.type() !== "error") return;
    if (injecting && /violates the following Content Security Policy/.test(msg.text())) refused.push(msg.text());
    // While the node restarts, the browser logs the requests it could not make.
    else if (restarting && /Failed to load resource/.test(msg.text())) return;
    else problems.push(`console: ${msg.text()}`);
  });
  const requests: string[] = [];
  page.on("request", (r) => requests.push(`${r.method()} ${new URL(r.url()).pathname}`));
  await page.goto(`${url}/dashboard#events`);
  await page.getByLabel("API token", { exact: true }).fill(TEST_TOKEN);
  await page.getByRole("button", { name: "Open dashboard" }).click();

  // ---- Events: the backlog shows what happened before the page was open, as sentences.
  await page.getByRole("heading", { name: "Events", level: 2 }).waitFor({ timeout: SEE_MS });
  const sentences = await until("the backlog's sentences", async () => {
    const lines = await page.locator(".feed .ev-text").allTextContents();
    return lines.some((l) => l.startsWith("ceo answered founder in #general")) ? lines : null;
  });
  expect(sentences.some((l) => /^seat ceo was taken up by node-1$/.test(l))).toBe(true);
  expect(sentences.some((l) => l === "ceo used work_create")).toBe(true);
  expect(sentences.some((l) => /^cto finished a turn on ENG-\d+ for ceo/.test(l))).toBe(true);
  // No raw key=value lines for events this page knows.
  expect(sentences.filter((l) => /\w=\S/.test(l))).toEqual([]);
  // Details on expand: the raw fields, as text.
  const first = page.locator(".feed li.ev").first();
  await first.locator("summary").click();
  expect(await first.locator(".ev-details li").count()).toBeGreaterThan(1);
  expect(await first.locator("time").getAttribute("title")).toMatch(/\d{4}/);
  // Filtered by seat: only @cto's.
  await page.getByLabel("Seat", { exact: true }).fill("cto");
  await page.getByRole("button", { name: "Apply" }).click();
  await until("only @cto's events", async () => {
    const l = await page.locator(".feed .ev-text").allTextContents();
    return l.length > 0 && l.every((x) => x.includes("cto")) && l.some((x) => x.startsWith("cto "));
  });
  await page.getByLabel("Seat", { exact: true }).fill("");
  await page.getByRole("button", { name: "Apply" }).click();
  await page.getByText("Live.", { exact: true }).waitFor({ timeout: SEE_MS });
  await checkView(page, "events", shot);

  // ---- Chat: live. Ask @engineer; watch "working…", then the reply, with no polling.
  await page.getByRole("link", { name: "Chat" }).click();
  await page.getByRole("heading", { name: "#general" }).waitFor({ timeout: SEE_MS });
  await page.locator(".live-state", { hasText: "Live." }).waitFor({ timeout: SEE_MS });
  requests.length = 0;
  await page.getByLabel("Message", { exact: true }).fill("@engineer are the tests green?");
  await page.getByRole("button", { name: "Post" }).click();
  const asked = page.locator(".messages > li", { hasText: "@engineer are the tests green?" });
  await asked.waitFor({ timeout: SEE_MS });
  await asked.locator(".turn-working", { hasText: "engineer is working…" }).waitFor({ timeout: SEE_MS });
  expect(await page.locator(".working-line").textContent()).toContain("engineer is working on a reply…");
  await page.screenshot({ path: join(SHOTS, "dashboard-chat-working.png"), fullPage: true });
  await asked.locator(".thread li", { hasText: "Tests are green." }).waitFor({ timeout: SEE_MS });
  await until("the working mark gone", async () => (await asked.locator(".turn-working").count()) === 0);
  // Nothing was polled: after the post, the reply and the turn's state came over the stream.
  expect(requests.filter((r) => /^GET .*\/messages$/.test(r))).toEqual([]);
  expect(requests.filter((r) => /^POST .*\/messages$/.test(r)).length).toBe(1);
  // A refused key: the message is marked failed, with the reason.
  await page.getByLabel("Message", { exact: true }).fill("@engineer and the deploy?");
  await page.getByRole("button", { name: "Post" }).click();
  const second = page.locator(".messages > li", { hasText: "@engineer and the deploy?" });
  await until("the message marked failed", async () => (await second.first().getAttribute("class"))?.includes("msg-failed"));
  expect(await second.locator(".failed-mark").textContent()).toContain("failed");
  expect(await second.locator(".failure-reason").textContent()).toContain("401");
  expect(await page.content()).not.toContain("sk-views-0123456789");
  await checkView(page, "chat", shot);

  // ---- Knowledge: a page written with a script injection renders inert.
  const spaces = (await api(url, "/pages/containers")).json.containers as { key: string }[];
  const space = spaces.find((s) => s.key.toLowerCase().includes("eng"))!.key;
  const evil = [
    "# Runbook",
    "Restart the *frobnicator* gently. See [the guide](https://example.com/guide).",
    "<script>window.__pwned = 'script'</script>",
    "<img src=x onerror=\"window.__pwned = 'img'\">",
    "[click me](javascript:window.__pwned='link')",
    "<a href=\"javascript:window.__pwned='a'\">and me</a>",
    "<iframe src=\"javascript:window.__pwned='frame'\"></iframe>",
    "<p onclick=\"window.__pwned='click'\" style=\"position:fixed\">styled</p>",
    "![alt text](https://example.com/x.png)",
  ].join("\n\n");
  expect((await api(url, `/pages/${encodeURIComponent(space)}/Runbook`, { method: "PUT", body: { body: evil, labels: ["ops"] } })).status).toBe(200);
  injecting = true;
  await page.getByRole("link", { name: "Knowledge" }).click();
  await page.getByRole("link", { name: space }).first().click();
  await page.getByRole("link", { name: "Runbook" }).click();
  const article = page.locator(".kb-page .markdown");
  await article.locator("h1", { hasText: "Runbook" }).waitFor({ timeout: SEE_MS });
  expect(await article.locator("em").textContent()).toBe("frobnicator");
  expect(await article.locator("a[href='https://example.com/guide']").getAttribute("rel")).toContain("noopener");
  expect(await article.locator("script, img, iframe, [onerror], [onclick], [style]").count()).toBe(0);
  const hrefs = await article.locator("a").evaluateAll((as) => as.map((a) => a.getAttribute("href")));
  expect(hrefs.filter((x) => x && !/^https:/.test(x))).toEqual([]);
  await article.getByText("click me").click();
  await article.getByText("and me").click();
  await article.getByText("styled").click();
  expect(await page.evaluate<unknown>("window.__pwned ?? null")).toBeNull();
  expect(await article.textContent()).toContain("[image: alt text]");
  // Search finds it.
  await page.getByLabel("Search", { exact: true }).fill("frobnicator");
  await page.getByRole("button", { name: "Search" }).click();
  await page.locator(".kb-hits a", { hasText: "Runbook" }).waitFor({ timeout: SEE_MS });
  await page.getByRole("link", { name: "Runbook" }).click();
  await article.locator("h1").waitFor({ timeout: SEE_MS });
  await checkView(page, "knowledge", shot);
  injecting = false;
  expect(refused.every((m) => m.includes("has been blocked"))).toBe(true);

  // ---- Work: 30 more items to page through, and the board by status.
  for (let i = 0; i < 30; i++) expect((await api(url, "/work", { body: { project: "OPS", title: `Chore ${i}` } })).status).toBe(200);
  await page.getByRole("link", { name: "Work" }).click();
  await until("the first page of work", async () => (await tableRows(page, /work items/)).length === 25);
  expect(await page.locator(".pager").first().textContent()).toContain("1–25 of 32");
  await page.getByRole("button", { name: "Next →" }).first().click();
  await until("the second page of work", async () => (await tableRows(page, /work items/)).length === 7);
  await page.getByRole("button", { name: "Board" }).click();
  const board = await until("the board's columns", async () => {
    const cols = await page.locator(".board-col").evaluateAll((els) => els.map((e) => ({ title: e.querySelector("h3")?.textContent ?? "", cards: [...e.querySelectorAll(".work-card a")].map((a) => a.textContent) })));
    return cols.length >= 5 && cols.some((c) => c.title.startsWith("in progress") && c.cards.length === 2) ? cols : null;
  });
  const todo = board.find((c) => c.title.startsWith("todo"))!;
  expect(todo.title).toContain("(30)");
  expect(todo.cards.length).toBe(20);
  await page.getByRole("button", { name: /^Show 10 more/ }).click();
  await until("all 30 to-do cards", async () => (await page.locator(".col-todo .work-card").count()) === 30);
  expect(await page.locator(".work-card time").first().getAttribute("title")).toMatch(/\d{4}/);
  await checkView(page, "work-board", shot);

  // ---- Operations: config revisions — a second revision, the diff, a rollback with confirmation.
  const next = structuredClone(company);
  next.schedules.push({ id: "retro", cron: "0 16 * * 5", seat: "ceo", prompt: "Run the retro." });
  next.roles.find((r: any) => r.handle === "cto").goal = "Own the roadmap.";
  expect((await api(url, "/config/revisions", { body: { company: next } })).status).toBe(201);
  await page.getByRole("link", { name: "Operations" }).click();
  await page.getByRole("link", { name: "Config revisions" }).click();
  const revs = await until("two revisions", async () => {
    const r = await tableRows(page, /company revisions/);
    return r.length === 2 ? r : null;
  });
  expect(revs[0]![5]).toBe("active");
  await page.getByRole("button", { name: "Show changes" }).click();
  const diff = await until("the diff", async () => {
    const l = await page.locator(".diff-lines li").allTextContents();
    return l.length ? l : null;
  });
  expect(diff).toContain('roles[cto].goal changed: "Own the technical roadmap and the engineering team." → "Own the roadmap."');
  expect(diff.some((l) => l.startsWith("schedules[retro].cron added"))).toBe(true);
  // Roll back: Activate asks first; Cancel does nothing; Yes activates.
  const older = page.locator("tr", { hasText: "stored" }).last();
  await older.getByRole("button", { name: "Activate" }).click();
  await older.getByRole("button", { name: "Cancel" }).click();
  expect((await api(url, "/config/revisions")).json.revisions.filter((r: any) => r.active).length).toBe(1);
  await older.getByRole("button", { name: "Activate" }).click();
  await older.getByRole("button", { name: "Yes, activate" }).click();
  await page.getByText(/is active \(epoch \d+/).waitFor({ timeout: SEE_MS });
  await until("the older revision active", async () => (await tableRows(page, /company revisions/))[1]?.[5] === "active");
  await checkView(page, "ops-config", shot);

  // Schedules.
  await page.getByRole("link", { name: "Schedules" }).click();
  const sched = await until("the standup schedule", async () => {
    const r = await tableRows(page, /schedule/);
    return r.find((x) => x[0] === "standup") ?? null;
  });
  expect(sched[1]).toBe("@pm");
  expect(sched[5]).toBe("enabled");
  expect(await page.locator("table time").first().getAttribute("title")).toMatch(/\d{4}/);
  await checkView(page, "ops-schedules", shot);

  // Dead letters: two put there by hand, one requeued, one discarded, each after a confirmation.
  const nc = await connect({ servers: `127.0.0.1:${node.clientPort}`, ...node.natsAuth() });
  const js = nc.jetstream();
  for (const seq of [1, 2]) {
    const data = new TextEncoder().encode(`{"not":"a trigger ${seq}"}`);
    const copy = deadLetterCopy("CREWLET_AGENT", { subject: "crewlet.agent.pm.inbox", data, headers: {}, msgId: undefined, deliveryCount: 25, streamSeq: 90_000 + seq }, "agent-pm", "handler failed 25 times");
    const hs = natsHeaders();
    for (const [k, v] of Object.entries(copy.headers)) hs.set(k, v);
    await js.publish(copy.subject, data, { headers: hs, msgID: copy.msgId });
  }
  await nc.close();
  await page.getByRole("link", { name: "Dead letters" }).click();
  // (The node's own dead letters may be there too: @engineer's refused turns.)
  const dls = await until("the two dead letters for @pm", async () => {
    const r = (await tableRows(page, /dead letter/)).filter((x) => x[1]!.includes("crewlet.agent.pm.inbox"));
    return r.length === 2 ? r : null;
  });
  expect(dls[0]![2]).toBe("handler failed 25 times");
  expect(dls[0]![3]).toBe("25");
  expect(dls[0]![4]).toContain('{"not":"a trigger 2"}');
  const [newest, oldest] = [dls[0]![0]!, dls[1]![0]!];
  const discardRow = page.locator(`tr[data-id="${newest}"]`);
  await discardRow.getByRole("button", { name: "Discard" }).click();
  await discardRow.getByRole("button", { name: "Yes, discard" }).click();
  await page.getByText(`Dead letter ${newest} discarded.`).waitFor({ timeout: SEE_MS });
  const requeueRow = page.locator(`tr[data-id="${oldest}"]`);
  await requeueRow.getByRole("button", { name: "Requeue" }).click();
  await requeueRow.getByRole("button", { name: "Yes, requeue" }).click();
  await page.getByText(`Dead letter ${oldest} requeued.`).waitFor({ timeout: SEE_MS });
  await until("both gone from the list", async () => {
    const ids = (await tableRows(page, /dead letter/)).map((r) => r[0]);
    return !ids.includes(newest) && !ids.includes(oldest);
  });
  await checkView(page, "ops-deadletters", shot);

  // Audit: the writes above (and twenty posts more), newest first, in pages of 50.
  for (let i = 0; i < 20; i++) expect((await api(url, "/chat/channels/ops/messages", { body: { body: `note ${i}`, author: "founder" } })).status).toBe(200);
  await page.getByRole("link", { name: "Audit log" }).click();
  const audit = await until("the audit log", async () => {
    const r = await tableRows(page, /Writes this node answered/);
    return r.length === 50 ? r : null;
  });
  expect(audit.some((r) => r[3]!.startsWith("DELETE /deadletters/"))).toBe(true);
  await page.getByRole("button", { name: "Older →" }).click();
  await until("the audit's second page", async () => {
    const r = await tableRows(page, /page 2/);
    return r.length > 0 && r.some((x) => x[3]!.startsWith("PUT /pages/")) ? r : null;
  });
  await checkView(page, "ops-audit", shot);

  // ---- The other views pass the same checks: the org chart, fleet, agents, an agent's page.
  for (const [hash, heading, name] of [
    ["#org", "Org chart", "org"],
    ["#fleet", "Fleet", "fleet"],
    ["#agents", "Agents", "agents"],
    ["#agent/cto", "@cto", "agent"],
    ["#work", "Work", "work-list"],
  ] as const) {
    await page.goto(`${url}/dashboard${hash}`);
    await page.getByRole("heading", { name: heading, level: 2 }).waitFor({ timeout: SEE_MS });
    await until(`${name} filled in`, async () => (await page.locator("#view-body").textContent())!.length > 40);
    await checkView(page, name, shot);
  }

  // ---- Chat reconnects by itself after the node restarts, and misses nothing posted since.
  await page.goto(`${url}/dashboard#chat/ops`);
  await page.getByRole("heading", { name: "#Operations" }).waitFor({ timeout: SEE_MS });
  await page.locator(".live-state", { hasText: "Live." }).waitFor({ timeout: SEE_MS });
  restarting = true;
  expect(await node.stop()).toBe(0);
  await page.locator(".live-state", { hasText: "reconnecting in" }).waitFor({ timeout: SEE_MS });
  await node.start();
  await node.waitReady(60_000);
  expect((await api(url, "/chat/channels/ops/messages", { body: { body: "back after the restart", author: "founder" } })).status).toBe(200);
  await page.locator(".messages > li", { hasText: "back after the restart" }).waitFor({ timeout: 60_000 });
  await page.locator(".live-state", { hasText: "Live." }).waitFor({ timeout: SEE_MS });
  restarting = false;
  // Each message once: the twenty notes and the new one.
  expect(await page.locator(".messages > li", { hasText: /^founder/ }).count()).toBe(21);

  expect(problems).toEqual([]);
}, 300_000);
