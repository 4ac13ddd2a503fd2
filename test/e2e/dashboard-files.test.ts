// A work item's files in headless Chromium against one `crewlet run` node: a person opens
// the item, attaches a PNG and a text file from the page (a real file input), sees both
// listed, previews the image (shown from the bytes the page fetched, at its real size) and
// the text, and the API lists the same files with the bytes uploaded. The view is checked
// as every view is (screenshot, axe-core, 390 px) with no console errors. A knowledge page
// takes and previews a file the same way. Needs Chromium
// at /usr/bin/chromium.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { deflateSync } from "node:zlib";
import type { BrowserContext } from "playwright-core";
import { checkView, openBrowser, SEE_MS, seen, watchProblems } from "./browser.ts";
import { makeFleet, TEST_TOKEN, type Fleet } from "../support/fleet.ts";

const SHOTS = process.env.CREWLET_DASHBOARD_SCREENSHOT_DIR ?? "/tmp";
const shot = (name: string) => join(SHOTS, `dashboard-${name}.png`);
const company = { name: "Files Co", providers: { llm: { s: { type: "scripted", rules: [{ reply: "ok" }] } } }, default_llm: "s", roles: [{ name: "Founder", handle: "founder", kind: "human" }] };

let fleet: Fleet | null = null;
let context: BrowserContext | null = null;
const profileDir = mkdtempSync(join(tmpdir(), "crewlet-chromium-"));
const fileDir = mkdtempSync(join(tmpdir(), "crewlet-upload-"));

afterAll(async () => {
  await context?.close().catch(() => undefined);
  await fleet?.stop();
  rmSync(profileDir, { recursive: true, force: true });
  rmSync(fileDir, { recursive: true, force: true });
});

/** A w×h solid-colour PNG, written by hand (no image library): signature, IHDR, IDAT, IEND. */
function png(w: number, h: number): Buffer {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (b: Buffer) => {
    let c = 0xffffffff;
    for (const x of b) c = crcTable[(c ^ x) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(body));
    return Buffer.concat([len, body, sum]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // truecolour
  const row = Buffer.concat([Buffer.from([0]), Buffer.alloc(w * 3, 0x33)]);
  const raw = Buffer.concat(Array.from({ length: h }, () => row));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", ihdr), chunk("IDAT", deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]);
}

test("a work item's files: attach from the page, listed, the image and the text previewed", async () => {
  fleet = await makeFleet({ nodes: [{ id: "node-1", kind: "member" }], company });
  const node = fleet.node("node-1");
  await node.start();
  await node.waitReady(60_000);
  const created = await node.post("/work", { title: "Logo review" });
  expect(created.status).toBe(200);
  const { key } = (await created.json()) as { key: string };
  const pngPath = join(fileDir, "logo.png");
  writeFileSync(pngPath, png(40, 30));
  const txtPath = join(fileDir, "notes.txt");
  writeFileSync(txtPath, "Make the logo bigger.\n");

  const opened = await openBrowser(profileDir);
  context = opened.context;
  const page = opened.page;
  const problems = watchProblems(page, { console: true });
  await page.goto(`${node.apiUrl}/dashboard#work/${key}`);
  await page.getByLabel("API token", { exact: true }).fill(TEST_TOKEN);
  await page.getByRole("button", { name: "Open dashboard" }).click();
  await page.getByRole("heading", { name: "Files", level: 4 }).waitFor({ timeout: SEE_MS });
  expect(await page.getByRole("list", { name: `Files on ${key}` }).textContent()).toContain("No files yet.");

  const input = page.getByLabel(`File to attach to ${key}`);
  const attach = page.getByRole("form", { name: `Attach a file to ${key}` }).getByRole("button", { name: "Attach", exact: true });
  for (const path of [pngPath, txtPath]) {
    await input.setInputFiles(path);
    await attach.click();
    await seen(`${path} listed`, async () => ((await page.getByRole("list", { name: `Files on ${key}` }).textContent()) ?? "").includes(path.split("/").at(-1)!), { tolerant: true });
  }
  const items = page.getByRole("list", { name: `Files on ${key}` }).locator("li");
  expect(await items.count()).toBe(2);

  // The image, previewed from the bytes the page fetched: decoded at its real size.
  await items.filter({ hasText: "logo.png" }).getByRole("button", { name: "Preview" }).click();
  const img = page.locator("figure.file-preview img");
  await img.waitFor({ timeout: SEE_MS });
  // A string run in the page (this file is typed for bun, not the DOM).
  await seen("the image decoded", async () => (await page.evaluate<number>("document.querySelector('figure.file-preview img')?.naturalWidth ?? 0")) === 40);
  expect(await img.getAttribute("alt")).toBe("logo.png");
  await checkView(page, "work-files", shot);

  // The text, as text.
  await items.filter({ hasText: "notes.txt" }).getByRole("button", { name: "Preview" }).click();
  await seen("the text previewed", async () => ((await page.locator("figure.file-preview pre").textContent()) ?? "").includes("Make the logo bigger."), { tolerant: true });

  // The API holds what the page uploaded, typed as the browser typed it.
  const listed = (await (await node.get(`/work/${key}/files`)).json()) as { files: { name: string; content_type: string; size: number }[] };
  expect(listed.files.map((f) => [f.name, f.content_type, f.size])).toEqual([
    ["logo.png", "image/png", png(40, 30).length],
    ["notes.txt", "text/plain", 22],
  ]);

  // A knowledge page carries files the same way.
  const put = await fetch(`${node.apiUrl}/pages/company/Brand`, { method: "PUT", headers: { authorization: `Bearer ${TEST_TOKEN}`, "content-type": "application/json" }, body: JSON.stringify({ body: "# Brand\n\nThe logo rules." }) });
  expect(put.status).toBe(200);
  await page.goto(`${node.apiUrl}/dashboard#knowledge/company/Brand`);
  await page.getByRole("heading", { name: "Brand", level: 3 }).waitFor({ timeout: SEE_MS });
  await page.getByLabel("File to attach to company/Brand").setInputFiles(pngPath);
  await page.getByRole("form", { name: "Attach a file to company/Brand" }).getByRole("button", { name: "Attach", exact: true }).click();
  const pageFiles = page.getByRole("list", { name: "Files on company/Brand" });
  await seen("the page's file listed", async () => ((await pageFiles.textContent()) ?? "").includes("logo.png"), { tolerant: true });
  await pageFiles.getByRole("button", { name: "Preview" }).click();
  await seen("the page's image decoded", async () => (await page.evaluate<number>("document.querySelector('figure.file-preview img')?.naturalWidth ?? 0")) === 40);
  expect(problems).toEqual([]);
}, 240_000);
