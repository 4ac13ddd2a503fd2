// The dashboard when a seat's model endpoint fails, in a real browser against a real
// one-box node whose @cto talks to an HTTP endpoint written here (issue 13): a person asks,
// the endpoint refuses the key, and the person sees the notice in the thread with their
// message marked failed; the agent row shows the error with its time; once the endpoint
// streams, the Events view shows the turn's text as it arrives.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { openBrowser, SEE_MS, seen, watchProblems } from "./browser.ts";
import { openAiStream, startModelServer, type ModelServer } from "../agent/model-server.ts";
import { makeFleet, TEST_TOKEN, type Fleet } from "../support/fleet.ts";


let fleet: Fleet | null = null;
let context: BrowserContext | null = null;
let server: ModelServer | null = null;
const profileDir = mkdtempSync(join(tmpdir(), "crewlet-chromium-"));

afterAll(async () => {
  await context?.close().catch(() => undefined);
  await fleet?.stop();
  server?.stop();
  rmSync(profileDir, { recursive: true, force: true });
});

const until = seen;

async function signIn(page: Page, url: string): Promise<void> {
  await page.goto(url);
  await page.getByLabel("API token", { exact: true }).fill(TEST_TOKEN);
  await page.getByRole("button", { name: "Open dashboard" }).click();
}

test("a refused key: the person sees the notice and their message marked failed; the agent row shows the error and when; a streamed answer shows live", async () => {
  server = startModelServer();
  server.script([{ status: 401, json: { error: { message: "Incorrect API key provided: sk-e2e-secret-key-123456", type: "invalid_request_error" } } }]);
  fleet = await makeFleet({
    nodes: [{ id: "node-1", kind: "member" }],
    company: {
      name: "Failing Co",
      providers: { llm: { openai: { type: "openai", base_url: server.url, model: "m", api_keys: ["sk-e2e-secret-key-123456"], stream: true } } },
      default_llm: "openai",
      roles: [{ name: "CTO", handle: "cto" }],
    },
  });
  const node = fleet.node("node-1");
  await node.start();
  await node.waitReady(60_000);

  const opened = await openBrowser(profileDir);
  context = opened.context;
  const page = opened.page;
  const problems = watchProblems(page);
  await signIn(page, `${node.apiUrl}/dashboard#chat`);
  await page.getByRole("heading", { name: "#general" }).waitFor({ timeout: SEE_MS });
  await page.getByLabel("Message", { exact: true }).fill("@cto status?");
  await page.getByRole("button", { name: "Post" }).click();

  // The person's message, marked failed, with @cto's notice in its thread.
  const asked = page.locator(".messages > li", { hasText: "@cto status?" });
  const notice = asked.locator(".thread li", { hasText: "refused the API key (401)" });
  await notice.waitFor({ timeout: SEE_MS });
  expect(await notice.locator(".msg-head strong").textContent()).toBe("cto");
  expect(await notice.locator(".msg-body").textContent()).toContain("check providers.llm.openai.api_keys");
  await until("the message marked failed", async () => (await asked.first().getAttribute("class"))?.includes("msg-failed"));
  expect(await asked.locator(".msg-head").first().textContent()).toContain("failed: not answered");
  expect(await page.content()).not.toContain("sk-e2e-secret-key-123456");
  expect(server.requests.length).toBe(1);

  // The agent row: the last error, with its time, and no secret.
  await page.getByRole("link", { name: "Agents" }).click();
  const row = await until("the last error on @cto's row", async () => {
    const cells = await page.locator("tbody tr", { hasText: "@cto" }).locator("td").allTextContents();
    return cells.some((c) => c.includes("HTTP 401")) ? cells : null;
  });
  const error = row.find((c) => c.includes("HTTP 401"))!;
  // Dated relative in the text ("just now · …"), the absolute date on hover.
  expect(error).toMatch(/^(just now|\d+ min ago) · provider /);
  const errorTime = page.locator("tbody tr", { hasText: "@cto" }).locator("td.error time");
  expect(await errorTime.getAttribute("title")).toMatch(/\d{4}/);
  expect(error).not.toContain("sk-e2e-secret-key-123456");

  // The org chart marks @cto failing; its agent page shows the error, dated, and no secret.
  await page.getByRole("link", { name: "Org", exact: true }).click();
  const ctoCard = page.locator('.seat-card[data-handle="cto"]');
  await until("@cto's card marked failing", async () => (await ctoCard.locator(".seat-state").textContent().catch(() => null)) === "failing");
  await ctoCard.click();
  const lastError = page.locator(".facts dt", { hasText: "Last error" }).locator("xpath=following-sibling::dd[1]");
  await until("@cto's last error on its page", async () => ((await lastError.textContent().catch(() => "")) ?? "").includes("HTTP 401"));
  expect(await lastError.textContent()).not.toContain("sk-e2e-secret-key-123456");
  expect(await lastError.locator("time").getAttribute("title")).toMatch(/\d{4}/);
  expect(await page.content()).not.toContain("sk-e2e-secret-key-123456");

  // A streamed answer, watched live in the Events view of a second tab.
  const feed = await context.newPage();
  feed.on("pageerror", (err) => problems.push(`feed page error: ${err.message}`));
  await signIn(feed, `${node.apiUrl}/dashboard#events`);
  await feed.getByText("Live.", { exact: true }).waitFor({ timeout: SEE_MS });
  server.script([{ ...openAiStream(["All ", "systems ", "green."]), chunk_delay_ms: 300 }]);
  await page.getByRole("link", { name: "Chat" }).click();
  await page.getByLabel("Message", { exact: true }).fill("@cto and now?");
  await page.getByRole("button", { name: "Post" }).click();
  // The feed shows the turn's words as turn_text events (gathered every 250 ms, the chunks
  // come 300 ms apart), then the whole answer in the thread.
  const partial = await until("the turn's first words in the event feed", async () => {
    const lines = await feed.locator(".feed li").allTextContents();
    return lines.find((l) => l.includes("cto is writing:") && l.includes("All "));
  });
  expect(partial).toContain("All ");
  await page.locator(".messages > li", { hasText: "@cto and now?" }).locator(".thread li", { hasText: "All systems green." }).waitFor({ timeout: SEE_MS });
  const live = await until("the turn's whole text in the event feed", async () => {
    const lines = await feed.locator(".feed li").allTextContents();
    return lines.find((l) => l.includes("cto is writing:") && l.includes("All systems green."));
  });
  expect(live).toContain("All systems green.");
  expect(problems).toEqual([]);
}, 180_000);
