// Webhooks on real `crewlet run` processes. The same signed GitHub delivery posted to two
// members of a 3-member fleet at the same moment wakes the routed seat once: one turn, one
// answer back to (fake) GitHub, whichever nodes took the requests and whichever holds the seat.
import { afterAll, expect, test } from "bun:test";
import { makeFleet, type Fleet } from "../support/fleet.ts";
import { api, until } from "../e2e/support.ts";
import { fixture, GH_SECRET, githubRequest, integrationsCompany, recordingProviderServer } from "./support.ts";

let fleet: Fleet | null = null;
const fake = recordingProviderServer();
afterAll(async () => {
  await fleet?.stop();
  fake.stop();
});

test("the same delivery to two members at once wakes the seat once: one turn, one answer back", async () => {
  const company = integrationsCompany({ githubBase: `http://127.0.0.1:${fake.port}`, slackBase: `http://127.0.0.1:${fake.port}` });
  fleet = await makeFleet({
    nodes: [
      { id: "a", kind: "member" },
      { id: "b", kind: "member" },
      { id: "c", kind: "member" },
    ],
    company: JSON.parse(JSON.stringify(company)),
  });
  for (const n of fleet.nodes) await n.start();
  await Promise.all(fleet.nodes.map((n) => n.waitReady(90_000)));
  await until("all 4 agent seats held", async () => (await api(fleet!.node("a").apiUrl, "/fleet")).json?.leases?.length === 4, 90_000);
  const req = githubRequest(fixture("github-issues-opened"), GH_SECRET, { delivery: crypto.randomUUID() });
  const send = (url: string) => fetch(`${url}/hooks/github/gh`, { method: "POST", headers: req.headers, body: req.body }).then((r) => r.status);
  // A 503 says "send it again" (the claim store or stream did not answer, as one clean-clone
  // CI run saw moments after the fleet formed): the sender does, as GitHub's redeliver would.
  const sendUntilAnswered = async (url: string) => {
    for (let attempt = 1; ; attempt++) {
      const status = await send(url);
      if (status !== 503 || attempt >= 20) return status;
      await Bun.sleep(1_000);
    }
  };
  const statuses = await Promise.all([sendUntilAnswered(fleet.node("a").apiUrl), sendUntilAnswered(fleet.node("b").apiUrl)]);
  expect(statuses.sort()).toEqual([200, 202]);
  // A redelivery to the third member later is a duplicate too.
  expect(await sendUntilAnswered(fleet.node("c").apiUrl)).toBe(200);
  const turns = () =>
    fleet!.nodes.flatMap((n) => n.events("turn_completed")).filter((e) => e.seat === "cto" && (e.trigger_ids as string[]).some((id) => id.startsWith("hook.gh.")));
  await until("cto's turn on the delivery", async () => turns().length >= 1, 60_000);
  await Bun.sleep(3_000);
  expect(turns().length).toBe(1);
  expect(fleet.nodes.flatMap((n) => n.events("integration_delivery_accepted")).length).toBe(1);
  expect(fleet.nodes.flatMap((n) => n.events("integration_delivery_duplicate")).length).toBe(2);
  // The root company's scripted reply went back to the issue, once.
  expect(fake.paths.filter((p) => p === "/repos/octocat/Hello-World/issues/1347/comments").length).toBe(1);
  // No node logged the secret.
  for (const n of fleet.nodes) expect(n.log()).not.toContain(GH_SECRET);
}, 240_000);
