// A leaf node (seats only, scratch store) takes its share of the fleet-wide notifications
// group: with the member running no seats, every webhook the member accepts is turned into
// wakes on the leaf, and the woken seats' turns run there.
import { afterAll, expect, test } from "bun:test";
import { makeFleet, type Fleet } from "../support/fleet.ts";
import { api, until } from "../e2e/support.ts";
import { fixture, GH_SECRET, githubRequest, integrationsCompany, recordingProviderServer, slackRequest } from "./support.ts";

let fleet: Fleet | null = null;
const fake = recordingProviderServer();
afterAll(async () => {
  await fleet?.stop();
  fake.stop();
});

test("a leaf node handles the notifications and runs the woken seats' turns", async () => {
  const company = integrationsCompany({ githubBase: `http://127.0.0.1:${fake.port}`, slackBase: `http://127.0.0.1:${fake.port}` });
  fleet = await makeFleet({
    nodes: [
      { id: "hub", kind: "member", roles: ["data", "ingress", "workers"] },
      { id: "leaf", kind: "leaf" },
    ],
    company: JSON.parse(JSON.stringify(company)),
  });
  const hub = fleet.node("hub");
  const leaf = fleet.node("leaf");
  await hub.start();
  await hub.waitReady(60_000);
  await leaf.start();
  await leaf.waitReady(60_000);
  await until("the leaf holds every seat", async () => (await api(hub.apiUrl, "/fleet")).json?.leases?.filter((l: any) => l.node === "leaf").length === 4, 60_000);
  const deliveries = [
    githubRequest(fixture("github-issues-opened"), GH_SECRET, { delivery: crypto.randomUUID() }),
    githubRequest(fixture("github-pull_request-opened"), GH_SECRET, { delivery: crypto.randomUUID() }),
    githubRequest(fixture("github-issues-labeled"), GH_SECRET, { delivery: crypto.randomUUID() }),
  ];
  for (const d of deliveries) {
    const res = await fetch(`${hub.apiUrl}/hooks/github/gh`, { method: "POST", headers: d.headers, body: d.body });
    expect(res.status).toBe(202);
  }
  const s = slackRequest(fixture("slack-app_mention"));
  expect((await fetch(`${hub.apiUrl}/hooks/slack/slack`, { method: "POST", headers: s.headers, body: s.body })).status).toBe(202);
  await until("4 wakes published by the leaf", async () => leaf.events("integration_wake_published").length === 4, 60_000);
  expect(hub.events("integration_wake_published").length).toBe(0);
  const hookTurns = () => leaf.events("turn_completed").filter((e) => (e.trigger_ids as string[]).some((id) => id.startsWith("hook.")));
  await until("the turns on the leaf", async () => hookTurns().length >= 3, 60_000);
  expect(new Set(hookTurns().map((e) => e.seat))).toEqual(new Set(["cto", "pm", "ceo"]));
}, 240_000);
