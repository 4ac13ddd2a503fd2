// A leaf node (seats only, no data, a scratch store) runs a seat pinned to it: its turn
// reads the thread and writes work items, its reply and its turn receipt through the estate
// router to the data node, across the leafnode connection and the JetStream domain.
import { afterAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parse } from "yaml";
import { makeFleet, type Fleet } from "../support/fleet.ts";
import { api, askCeoForAPlan, until } from "./support.ts";

const root = (parse(readFileSync(resolve(import.meta.dir, "../../crewlet.yaml"), "utf8")) as { company: any }).company;
const company = {
  ...root,
  roles: root.roles.map((r: any) => (r.handle === "ceo" ? { ...r, placement: { node: "leaf" } } : r)),
};
let fleet: Fleet | null = null;
afterAll(async () => {
  await fleet?.stop();
});

test("a seat pinned to a leaf node works through the router", async () => {
  fleet = await makeFleet({
    nodes: [
      { id: "hub", kind: "member" },
      { id: "leaf", kind: "leaf" },
    ],
    company,
  });
  const hub = fleet.node("hub");
  const leaf = fleet.node("leaf");
  await hub.start();
  await hub.waitReady(60_000);
  await leaf.start();
  await leaf.waitReady(60_000);
  const leafHealth = await api(leaf.apiUrl, "/health");
  expect(leafHealth.json.broker).toBe("leaf");
  expect(leafHealth.json.estate?.data).toBe(false);
  await until("@ceo held by the leaf", async () => {
    const { json } = await api(hub.apiUrl, "/fleet");
    return json?.leases?.some((l: any) => l.handle === "ceo" && l.node === "leaf");
  }, 40_000);
  const { reply, items } = await askCeoForAPlan(hub.apiUrl);
  expect(reply.author).toBe("ceo");
  expect(items.some((w: any) => w.reporter === "ceo")).toBe(true);
  // The turn ran on the leaf, which holds no copy: every read and write was routed. Its
  // reply is posted before the turn ends, so turn_completed may be logged a moment after
  // the reply is seen (~100 ms measured).
  await until("the leaf logs the ceo's turn_completed", async () => leaf.events("turn_completed").some((e) => e.seat === "ceo"), 20_000);
  expect(hub.events("turn_completed").some((e) => e.seat === "ceo")).toBe(false);
  // Its receipt, written by the leaf through the router, is the fleet's: the hub answers it.
  const receipts = await until("the ceo's receipt on the hub", async () => {
    const { json } = await api(hub.apiUrl, "/turns?seat=ceo");
    return json?.turns?.length > 0 ? json.turns : null;
  }, 20_000);
  expect(receipts[0]).toMatchObject({ seat: "ceo", node: "leaf", outcome: "completed", links: { channel: "general" } });
  // Its summary is the turn's final words, which the reply in the thread carries.
  expect(receipts[0].summary.length).toBeGreaterThan(0);
  expect(reply.body).toContain(receipts[0].summary.replace(/…$/, "").slice(0, 200));
}, 180_000);
