// One company for the whole fleet, as real processes: a node that boots with a different
// company file activates it, and a running peer applies it at once (the nudge), creating
// the new seat's mailbox and placing it.
import { afterAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parse, stringify } from "yaml";
import { makeFleet, TEST_TOKEN, type Fleet } from "../support/fleet.ts";
import { api, until } from "../e2e/support.ts";
import { companySchema } from "../../src/config/company.ts";
import { companyDigest } from "../../src/config/company-revisions.ts";

let fleet: Fleet | null = null;
afterAll(async () => {
  await fleet?.stop();
});

const v1 = { name: "Acme", roles: [{ name: "CEO", handle: "ceo" }, { name: "CTO", handle: "cto" }] };
const v2 = { name: "Acme", roles: [...v1.roles, { name: "Designer", handle: "designer" }] };

test("a peer's newer company is applied at once by a running node", async () => {
  fleet = await makeFleet({
    nodes: [
      { id: "a", kind: "member", company: v1 },
      { id: "b", kind: "member", company: v1 },
      { id: "c", kind: "member" },
    ],
  });
  const [a, b, c] = fleet.nodes as [any, any, any];
  for (const n of [a, b, c]) await n.start();
  await Promise.all([a, b, c].map((n) => n.waitReady(60_000)));
  // c booted with no company of its own and runs the fleet's.
  await until("c applied the fleet's company", async () => {
    const { json } = await api(c.apiUrl, "/agents");
    return json?.agents?.length === 2;
  });
  const before = (await api(a.apiUrl, "/health")).json.company_epoch as number;

  // b restarts with a newer company: it activates it, and a applies it well before its
  // 15 s poll would have.
  await b.stop();
  const cfg = parse(readFileSync(b.configFile, "utf8"));
  cfg.company = v2;
  writeFileSync(b.configFile, stringify(cfg));
  await b.start();
  await b.waitReady(60_000);
  const applied = await until("a applied the newer company", async () => {
    const h = (await api(a.apiUrl, "/health")).json;
    return h.company_epoch > before ? h : null;
  }, 10_000);
  expect(applied.company_epoch).toBeGreaterThan(before);
  const designer = await until("the new seat is placed somewhere", async () => {
    const { json } = await api(a.apiUrl, "/agents/designer");
    return json?.holder ? json : null;
  }, 30_000);
  expect(designer.handle).toBe("designer");
  expect(a.events("config_revision_applied").length).toBeGreaterThanOrEqual(2);
}, 180_000);

const digestOf = (company: unknown) => companyDigest(companySchema.parse(company));
const MAIN = resolve(import.meta.dir, "../../src/main.ts");
function cli(node: { apiUrl: string }, ...args: string[]) {
  const p = Bun.spawnSync([process.execPath, MAIN, "config", ...args, "--url", node.apiUrl, "--token", TEST_TOKEN], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
}
async function agents(node: { apiUrl: string }): Promise<string[]> {
  const { json } = await api(node.apiUrl, "/agents");
  return (json?.agents ?? []).map((a: any) => a.handle).sort();
}

test("a restart with a stale file changes nothing; the API and CLI store, activate and roll back revisions", async () => {
  const [a, b, c] = fleet!.nodes as [any, any, any];
  const epoch = async (n: any) => (await api(n.apiUrl, "/health")).json.company_epoch as number;
  // After the first test: b's edited file (v2) is the fleet's company; a still has v1.
  const before = await epoch(b);
  await a.stop();
  await a.start();
  await a.waitReady(60_000);
  const notApplied = a.events("config_file_not_applied");
  expect(notApplied.length).toBe(1);
  expect(notApplied[0]).toMatchObject({ file_digest: digestOf(v1), active_digest: digestOf(v2), reason: "file_unchanged" });
  expect(await epoch(b)).toBe(before);
  expect(await epoch(a)).toBe(before);
  expect(await agents(a)).toEqual(["ceo", "cto", "designer"]);

  // The revisions the fleet has stored, the active one marked.
  const listed = await api(a.apiUrl, "/config/revisions");
  expect(listed.status).toBe(200);
  expect(listed.json.revisions.map((r: any) => [r.digest, r.active]).sort()).toEqual(
    [[digestOf(v1), false], [digestOf(v2), true]].sort(),
  );
  const one = await api(a.apiUrl, `/config/revisions/${digestOf(v1)}`);
  expect(one.json.company.roles.map((r: any) => r.handle)).toEqual(["ceo", "cto"]);
  expect((await api(a.apiUrl, `/config/revisions/${"0".repeat(64)}`)).status).toBe(404);
  expect((await api(a.apiUrl, "/config/revisions/nothex")).status).toBe(400);

  // A company that fails validation is refused naming the field, and nothing is stored.
  const bad = await api(a.apiUrl, "/config/revisions", { body: { company: { name: "Acme", roles: [{ name: "CEO", handle: "ceo", manages: ["nobody"] }] } } });
  expect(bad.status).toBe(400);
  expect(bad.json.error.field).toBe("company.roles[0].manages[0]");
  expect((await api(a.apiUrl, "/config/revisions")).json.revisions.length).toBe(2);

  // crewlet config apply: a new revision, stored and active on every node.
  const v3 = { name: "Acme", roles: [...v2.roles, { name: "Writer", handle: "writer" }] };
  const file = join(fleet!.root, "v3.yaml");
  writeFileSync(file, stringify({ company: v3 }));
  const applied = cli(c, "apply", file, "--json");
  expect(applied.code).toBe(0);
  expect(JSON.parse(applied.out)).toMatchObject({ digest: digestOf(v3), changed: true, seats: 4 });
  for (const n of [a, b, c]) await until(`${n.id} runs v3`, async () => (await agents(n)).includes("writer"), 20_000);
  const badFile = join(fleet!.root, "bad.yaml");
  writeFileSync(badFile, "name: Acme\nroles:\n  - {name: CEO, handle: ceo, manages: [ghost]}\n");
  const refused = cli(c, "apply", badFile);
  expect(refused.code).toBe(2);
  expect(refused.err).toContain("roles[0].manages[0]");

  const list = cli(a, "list", "--json");
  expect(list.code).toBe(0);
  expect(JSON.parse(list.out).revisions.find((r: any) => r.active).digest).toBe(digestOf(v3));
  expect(cli(a, "list").out).toContain(digestOf(v3).slice(0, 12));
  const shown = cli(a, "show", digestOf(v3).slice(0, 10));
  expect(shown.code).toBe(0);
  expect(shown.out).toContain("handle: writer");

  // crewlet config activate: a rollback to v1, applied everywhere.
  const rolled = cli(b, "activate", digestOf(v1).slice(0, 12), "--json");
  expect(rolled.code).toBe(0);
  expect(JSON.parse(rolled.out)).toMatchObject({ digest: digestOf(v1), changed: true });
  for (const n of [a, b, c]) await until(`${n.id} runs v1 again`, async () => (await agents(n)).join() === "ceo,cto", 20_000);

  // b's file still says v2, which it seeded itself: its restart leaves the rollback alone.
  const rolledEpoch = await epoch(a);
  await b.stop();
  await b.start();
  await b.waitReady(60_000);
  expect(b.events("config_file_not_applied")[0]).toMatchObject({ file_digest: digestOf(v2), active_digest: digestOf(v1) });
  expect(await epoch(a)).toBe(rolledEpoch);
  expect(await agents(b)).toEqual(["ceo", "cto"]);

  // An operator edits a's file and restarts it: the edit is the fleet's company.
  const v4 = { name: "Acme", roles: [...v1.roles, { name: "Analyst", handle: "analyst" }] };
  const cfg = parse(readFileSync(a.configFile, "utf8"));
  cfg.company = v4;
  writeFileSync(a.configFile, stringify(cfg));
  await a.stop();
  await a.start();
  await a.waitReady(60_000);
  expect(a.events("config_file_applied")[0]).toMatchObject({ digest: digestOf(v4), reason: "file_changed" });
  for (const n of [a, b, c]) await until(`${n.id} runs a's edit`, async () => (await agents(n)).includes("analyst"), 20_000);
}, 240_000);
