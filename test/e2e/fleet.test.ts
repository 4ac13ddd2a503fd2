// The root company on a 3-member fleet: the same conversation works whichever node holds
// each seat, and whichever node the person talks to.
import { afterAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parse } from "yaml";
import { makeFleet, type Fleet } from "../support/fleet.ts";
import { api, askCeoForAPlan, until } from "./support.ts";

const rootCompany = (parse(readFileSync(resolve(import.meta.dir, "../../crewlet.yaml"), "utf8")) as { company: unknown }).company;
let fleet: Fleet | null = null;
afterAll(async () => {
  await fleet?.stop();
});

test("a 3-node fleet runs the root company whichever node holds each seat", async () => {
  fleet = await makeFleet({
    nodes: [
      { id: "a", kind: "member" },
      { id: "b", kind: "member" },
      { id: "c", kind: "member" },
    ],
    company: rootCompany,
  });
  for (const n of fleet.nodes) await n.start();
  await Promise.all(fleet.nodes.map((n) => n.waitReady(60_000)));
  // Every agent seat held and the shares balanced (a node that booted first gives its
  // excess back as peers appear: at most ceil(4 / 3) = 2 each).
  const leases = await until("all 4 agent seats held, at most 2 per node", async () => {
    const { json } = await api(fleet!.node("a").apiUrl, "/fleet");
    if (json?.leases?.length !== 4) return null;
    const per = new Map<string, number>();
    for (const l of json.leases) per.set(l.node, (per.get(l.node) ?? 0) + 1);
    return Math.max(...per.values()) <= 2 ? json.leases : null;
  }, 60_000);
  const holders = new Set(leases.map((l: any) => l.node));
  expect(holders.size).toBeGreaterThan(1);
  // Talk to a node that does not hold @ceo, so the wake crosses the fleet.
  const ceoHolder = leases.find((l: any) => l.handle === "ceo").node;
  const entry = fleet.nodes.find((n) => n.id !== ceoHolder)!;
  const { reply, items } = await askCeoForAPlan(entry.apiUrl);
  expect(reply.author).toBe("ceo");
  expect(items.filter((w: any) => w.assignee === "cto" || w.assignee === "pm").length).toBe(2);
  // Every data node's copy shows the same work.
  for (const n of fleet.nodes) {
    const seen = await until(`${n.id} sees both items`, async () => {
      const { json } = await api(n.apiUrl, "/work");
      return (json?.items ?? []).length >= 2 ? json.items : null;
    });
    expect(seen.map((w: any) => w.key).sort()).toEqual(items.map((w: any) => w.key).sort());
  }
}, 180_000);
