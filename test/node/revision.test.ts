// One company for the whole fleet, as real processes: a node that boots with a different
// company file activates it, and a running peer applies it at once (the nudge), creating
// the new seat's mailbox and placing it.
import { afterAll, expect, test } from "bun:test";
import { makeFleet, type Fleet } from "../support/fleet.ts";
import { api, until } from "../e2e/support.ts";

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
  const { writeFileSync, readFileSync } = await import("node:fs");
  const { parse, stringify } = await import("yaml");
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
