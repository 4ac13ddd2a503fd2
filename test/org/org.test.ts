import { describe, expect, test } from "bun:test";
import { v5 } from "uuid";
import { companySchema } from "../../src/config/company.ts";
import { AGENT_ID_NAMESPACE, agentIdFor, buildOrg } from "../../src/org/org.ts";
import { routeFor } from "../../src/org/routing.ts";

const company = companySchema.parse({
  name: "Acme Robotics",
  mission: "Build robots.",
  policies: ["Reply in thread."],
  default_llm: "offline",
  providers: { llm: { offline: { type: "scripted" }, fast: { type: "scripted" } } },
  roles: [
    { name: "CEO", handle: "ceo", manages: ["cto", "pm"] },
    { name: "CTO", handle: "cto", manages: ["engineer"], llm: "fast" },
    { name: "Product Manager", handle: "pm" },
    { name: "Engineer", handle: "engineer", placement: { labels: { gpu: "yes" } } },
    { name: "Field Engineer", placement: { labels: { gpu: "yes" } } },
    { name: "Founder", handle: "founder", kind: "human" },
  ],
  units: [
    {
      name: "Engineering",
      id: "eng",
      lead: "cto",
      project: "ENG",
      roles: ["engineer"],
      units: [{ name: "Platform Team", roles: ["field-engineer"] }],
    },
    { name: "Operations", id: "ops", lead: "pm", roles: ["pm"] },
  ],
});
const org = buildOrg(company);

describe("agent ids", () => {
  test("the namespace literal is the documented derivation", () => {
    expect(AGENT_ID_NAMESPACE).toBe(v5("https://crewlet.dev/ns/agent", v5.URL));
  });
  test.each([
    ["Acme Robotics", "ceo"],
    ["Acme Robotics", "cto"],
    ["Other Co", "ceo"],
  ])("uuid v5 over '%s:%s'", (name, handle) => {
    expect(agentIdFor(name, handle)).toBe(v5(`${name}:${handle}`, AGENT_ID_NAMESPACE));
  });
  test("same handle in two companies is two agents; humans have none", () => {
    expect(agentIdFor("Acme Robotics", "ceo")).not.toBe(agentIdFor("Other Co", "ceo"));
    expect(org.seat("founder")?.agent_id).toBeNull();
    expect(org.seat("ceo")?.agent_id).toBe(agentIdFor("Acme Robotics", "ceo"));
  });
});

describe("seats and reporting lines", () => {
  test.each([
    // handle, manager, reports, units, llm
    ["ceo", null, ["cto", "pm"], [], "offline"],
    ["cto", "ceo", ["engineer"], ["eng"], "fast"],
    ["pm", "ceo", [], ["ops"], "offline"],
    ["engineer", "cto", [], ["eng"], "offline"],
    ["field-engineer", null, [], ["platform-team"], "offline"],
    ["founder", null, [], [], "offline"],
  ] as const)("%s", (handle, manager, reports, units, llm) => {
    const s = org.seat(handle)!;
    expect(s.manager).toBe(manager);
    expect([...s.reports]).toEqual([...reports]);
    expect([...s.units]).toEqual([...units]);
    expect(s.llm).toBe(llm);
  });
  test("agent seats exclude people", () => {
    expect(org.agentSeats().map((s) => s.handle)).toEqual(["ceo", "cto", "pm", "engineer", "field-engineer"]);
    expect(org.agentSeat("founder")).toBeUndefined();
  });
});

describe("units", () => {
  test("nesting keeps parent and children", () => {
    expect(org.unit("eng")?.children).toEqual(["platform-team"]);
    expect(org.unit("platform-team")?.parent).toBe("eng");
    expect(org.unit("ops")?.parent).toBeNull();
    expect(org.unit("eng")?.project).toBe("ENG");
  });
});

describe("colleagues", () => {
  test.each([
    ["cto", [["ceo", "manager"], ["engineer", "report"], ["pm", "company"], ["field-engineer", "company"], ["founder", "company"]]],
    ["engineer", [["cto", "manager"], ["ceo", "company"], ["pm", "company"], ["field-engineer", "company"], ["founder", "company"]]],
    ["pm", [["ceo", "manager"], ["cto", "company"], ["engineer", "company"], ["field-engineer", "company"], ["founder", "company"]]],
  ] as const)("%s", (handle, want) => {
    expect(org.colleaguesOf(handle).map((c) => [c.handle, c.relation])).toEqual(want.map((w) => [...w]));
  });
  test("an unknown seat has none", () => {
    expect(org.colleaguesOf("nobody")).toEqual([]);
  });
});

describe("placement groups", () => {
  test("agent seats with equal placement share a group", () => {
    const groups = org.placementGroups().map((g) => [...g.seats]);
    expect(groups).toEqual([["ceo", "cto", "pm"], ["engineer", "field-engineer"]]);
  });
});

describe("routing", () => {
  test.each([
    ["ceo", { ok: true, subject: "crewlet.seats.11.ceo.inbox", group: "agent-ceo" }],
    ["@pm", { ok: true, subject: "crewlet.seats.11.pm.inbox", group: "agent-pm" }],
    ["founder", { ok: false, reason: "human_seat" }],
    ["ghost", { ok: false, reason: "unknown_seat" }],
  ] as const)("%s", (handle, want) => {
    const r = routeFor(org, handle);
    if (want.ok) {
      expect(r.ok).toBe(true);
      if (r.ok) {
        expect(r.route.subject).toBe(want.subject);
        expect(r.route.group).toBe(want.group);
        expect(r.route.agent_id).toBe(agentIdFor("Acme Robotics", r.route.handle));
      }
    } else {
      expect(r).toEqual({ ok: false, reason: want.reason });
    }
  });
});
