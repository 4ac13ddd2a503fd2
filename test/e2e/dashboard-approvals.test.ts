// The Approvals view, in headless Chromium against a one-box node whose company says filing
// a work item needs a person's yes. A person asks @engineer to file two things in #general;
// both calls park and appear on the page with the call, its arguments and the rule. By
// keyboard the person approves one (with a reason) and tries to reject the other without
// saying why (the page asks for a reason), then rejects it with one. The approved item is
// filed once, the rejected one never, both decisions move under "Decided", the engineer's
// thread hears each, and the audit log names them. Checked as every view is (screenshot,
// axe-core, 390 px) with no console errors. Needs Chromium at /usr/bin/chromium.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext } from "playwright-core";
import { checkView, openBrowser, SEE_MS, seen, tableRows, watchProblems } from "./browser.ts";
import { makeFleet, TEST_TOKEN, type Fleet } from "../support/fleet.ts";

const SHOTS = process.env.CREWLET_DASHBOARD_SCREENSHOT_DIR ?? "/tmp";
const shot = (name: string) => join(SHOTS, `dashboard-${name}.png`);

const company = {
  name: "Approvals Co",
  providers: {
    llm: {
      s: {
        type: "scripted",
        rules: [
          { when: { trigger: "approval_decided" }, reply: "Heard: {{text}}" },
          { when: { seat: "engineer", text: "(?i)file (\\w+)" }, tool_calls: [{ tool: "work_create", args: { project: "ENG", title: "Filed from: {{text}}" } }], reply: "Asked for approval to file it." },
          { when: {}, reply: "ok" },
        ],
      },
    },
  },
  default_llm: "s",
  roles: [
    { name: "Engineer", handle: "engineer" },
    { name: "Founder", handle: "founder", kind: "human" },
  ],
  units: [{ name: "Engineering", id: "engineering", project: "ENG", roles: ["engineer"] }],
  approvals: { rules: [{ name: "filing work", tools: ["work_create"] }] },
};

let fleet: Fleet | null = null;
let context: BrowserContext | null = null;
const profileDir = mkdtempSync(join(tmpdir(), "crewlet-chromium-"));

afterAll(async () => {
  await context?.close().catch(() => undefined);
  await fleet?.stop();
  rmSync(profileDir, { recursive: true, force: true });
});

const until = <T>(what: string, check: () => Promise<T | null | undefined | false>) => seen(what, check, { tolerant: true });

test("approvals view: two parked calls, one approved and one rejected by keyboard, each decided once", async () => {
  const VIEWER = "viewer-token-0123456789abcdef";
  fleet = await makeFleet({ nodes: [{ id: "node-1", kind: "member" }], company, tokens: [{ id: "viewer", token: VIEWER, grants: ["state:read"] }] });
  const node = fleet.node("node-1");
  await node.start();
  await node.waitReady(60_000);
  for (const what of ["alpha", "beta"]) {
    const res = await node.post("/chat/channels/general/messages", { body: `@engineer please file ${what}`, author: "founder" });
    expect(res.status).toBeLessThan(300);
  }
  const filed = async (token: string) => ((await (await node.get("/work?project=ENG&limit=500")).json()) as { items: { title: string }[] }).items.filter((w) => w.title.includes(token)).length;

  const opened = await openBrowser(profileDir);
  context = opened.context;
  const page = opened.page;
  const problems = watchProblems(page, { console: true });
  await page.goto(`${node.apiUrl}/dashboard#approvals`);
  await page.getByLabel("API token", { exact: true }).fill(TEST_TOKEN);
  await page.getByRole("button", { name: "Open dashboard" }).click();
  await page.getByRole("heading", { name: "Approvals", level: 2 }).waitFor({ timeout: SEE_MS });
  await page.getByRole("heading", { name: "Waiting for a decision (2)", level: 3 }).waitFor({ timeout: SEE_MS });

  const card = (token: string) => page.locator("article.approval-card", { hasText: `please file ${token}` });
  const alpha = card("alpha");
  const beta = card("beta");
  await until("both requests", async () => (await alpha.count()) === 1 && (await beta.count()) === 1);
  expect(await alpha.getByRole("heading", { level: 4 }).textContent()).toBe("@engineer wants to call work_create");
  expect(await alpha.textContent()).toContain('Rule "filing work" · asked ');
  expect(await alpha.textContent()).not.toContain("[object");
  expect(await alpha.locator("pre").textContent()).toContain('"project": "ENG"');
  await checkView(page, "approvals", shot);

  // A token without approvals:decide sees the requests but cannot decide one.
  const pending = ((await (await node.get("/approvals?state=pending")).json()) as { approvals: { id: string }[] }).approvals;
  expect(pending).toHaveLength(2);
  const refused = await fetch(`${node.apiUrl}/approvals/${pending[0]!.id}/approve`, { method: "POST", headers: { authorization: `Bearer ${VIEWER}`, "content-type": "application/json" }, body: "{}" });
  expect(refused.status).toBe(403);
  expect(((await refused.json()) as { error: { message: string } }).error.message).toContain("approvals:decide");

  // Approve alpha by keyboard: type the reason, Tab to Approve, Enter.
  await alpha.getByLabel("Reason").focus();
  await page.keyboard.type("looks right");
  await page.keyboard.press("Tab");
  expect(await page.evaluate<string>("document.activeElement?.textContent ?? ''")).toBe("Approve");
  await page.keyboard.press("Enter");
  await until("alpha decided", async () => (await alpha.count()) === 0);

  // Reject beta with no reason: the page asks for one and decides nothing.
  await beta.getByRole("button", { name: "Reject" }).focus();
  await page.keyboard.press("Enter");
  await until("the page asking why", async () => ((await page.locator(".control-note.error").textContent()) ?? "").includes("Say why you reject it"));
  expect(await page.evaluate<string>("document.activeElement?.id ?? ''")).toMatch(/^approval-reason-ap-/);
  await page.keyboard.type("not now");
  await beta.getByRole("button", { name: "Reject" }).focus();
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Waiting for a decision (0)", level: 3 }).waitFor({ timeout: SEE_MS });

  const decided = await until("both under Decided, the approved one run", async () => {
    const rows = await tableRows(page, /^Decided requests/);
    return rows.length === 2 && rows.some((r) => r[3] === "approved" && r[6] === "ran") ? rows : null;
  });
  expect(decided.find((r) => r[3] === "rejected")).toEqual([expect.stringMatching(/^ap-/), "@engineer", "work_create", "rejected", expect.stringMatching(/^token:/), "not now", "did not run", expect.any(String)]);
  expect(decided.find((r) => r[3] === "approved")![5]).toBe("looks right");
  await checkView(page, "approvals-decided", shot);

  expect(await filed("alpha")).toBe(1);
  expect(await filed("beta")).toBe(0);
  // The audit log: each decision with its reason, and the viewer's refused attempt as refused.
  const audit = (await (await node.get("/audit?limit=200")).json()) as { entries: { action: string; outcome: string; token_id: string | null; detail: string | null }[] };
  const decisions = audit.entries.filter((e) => e.action.startsWith("approval."));
  expect(decisions.filter((e) => e.outcome === "ok" && e.action === "approval.approve").map((e) => e.detail)).toEqual([expect.stringContaining("looks right")]);
  expect(decisions.filter((e) => e.outcome === "ok" && e.action === "approval.reject").map((e) => e.detail)).toEqual([expect.stringContaining("not now")]);
  expect(decisions.filter((e) => e.outcome === "refused")).toEqual([expect.objectContaining({ action: "approval.approve", token_id: "viewer" })]);
  expect(problems).toEqual([]);
}, 240_000);
