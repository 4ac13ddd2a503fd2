// Tool skills from the skills source: a page's shape as a skill (a table), and the node's
// registry walking a real estate copy (SQLite) — at start, on a moved source, and on its
// period; a failed walk keeps what it had and is tried again soon.
import { afterEach, describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { memoryLogger } from "../../src/log.ts";
import { MAX_TOOL_SKILLS, parseToolSkill, TOOL_SKILL_RETRY_MS, TOOL_SKILL_SYNC_MS, ToolSkillRegistry } from "../../src/agent/tool-skills.ts";
import { LocalEstate, rootCompany } from "./support.ts";

describe("a page as a tool skill", () => {
  test.each([
    ["the title's terms when no triggers line", { title: "Deploy to staging", body: "Run the pipeline, then smoke test." }, ["deploy", "staging"], "Run the pipeline, then smoke test."],
    ["a first line `triggers:` names the terms and is not carried", { title: "Releases", body: "Triggers: release, changelog\nTag it, write the changelog." }, ["release", "changelog"], "Tag it, write the changelog."],
    ["an empty body is no skill", { title: "Deploy to staging", body: "  " }, null, null],
    ["a title of stopwords alone is no skill", { title: "How to do it", body: "something" }, null, null],
  ] as const)("%s", (_, page, terms, body) => {
    const s = parseToolSkill({ container: "Skills", ...page });
    if (terms === null) expect(s).toBeNull();
    else expect(s).toMatchObject({ kind: "tool", name: page.title, terms: [...terms], body });
  });
});

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const f of cleanup.splice(0)) f();
});

function setup() {
  const estate = new LocalEstate(rootCompany());
  cleanup.push(() => estate.close());
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const { log, sink } = memoryLogger("debug", clock);
  const put = (container: string, title: string, body: string) =>
    estate.write("pages", { op: "page.put", container, title, body, labels: [], author: "founder", base_revision: null });
  const reg = new ToolSkillRegistry({ estate, clock, log });
  cleanup.push(() => reg.stop());
  return { estate, clock, sink, put, reg };
}

async function settle(reg: ToolSkillRegistry): Promise<void> {
  await reg.sync("test"); // joins a walk under way, or walks once more
}

describe("the node's tool-skill registry", () => {
  test("boot walk, a moved source, and the periodic walk each bring the source's pages", async () => {
    const { clock, put, reg } = setup();
    await put("Engineering", "Deploy to staging", "Run the pipeline first.");
    await put("Operations", "Rotate keys", "Use the vault.");
    reg.start("Engineering");
    await settle(reg);
    expect(reg.skills().map((s) => s.name)).toEqual(["Deploy to staging"]);
    reg.setSource("Operations");
    await settle(reg);
    expect(reg.skills().map((s) => s.name)).toEqual(["Rotate keys"]);
    await put("Operations", "Incident review", "Write the timeline first.");
    await clock.advance(TOOL_SKILL_SYNC_MS);
    await settle(reg);
    expect(reg.skills().map((s) => s.name).sort()).toEqual(["Incident review", "Rotate keys"]);
    reg.setSource(null);
    await settle(reg);
    expect(reg.skills()).toEqual([]);
  });

  test("a failed walk keeps what the registry had, and is tried again soon", async () => {
    const { estate, clock, put, reg, sink } = setup();
    await put("Engineering", "Deploy to staging", "Run the pipeline first.");
    reg.start("Engineering");
    await settle(reg);
    const real = estate.read.bind(estate);
    let down = true;
    (estate as { read: typeof estate.read }).read = (async (q: Parameters<typeof estate.read>[0]) => {
      if (down) throw new Error("no data node answered");
      return real(q);
    }) as typeof estate.read;
    await put("Engineering", "Release", "Tag it.");
    await clock.advance(TOOL_SKILL_SYNC_MS);
    await settle(reg);
    expect(reg.skills().map((s) => s.name)).toEqual(["Deploy to staging"]);
    expect(sink.lines.some((l) => l.event === "tool_skills_sync_failed")).toBe(true);
    down = false;
    await clock.advance(TOOL_SKILL_RETRY_MS);
    await settle(reg);
    expect(reg.skills().map((s) => s.name).sort()).toEqual(["Deploy to staging", "Release"]);
  });

  test(`a walk reads at most ${MAX_TOOL_SKILLS} pages`, async () => {
    const { put, reg } = setup();
    for (let i = 0; i < MAX_TOOL_SKILLS + 5; i++) await put("Engineering", `Skill number ${String(i).padStart(3, "0")} deploy`, "Do it.");
    reg.start("Engineering");
    await settle(reg);
    expect(reg.skills()).toHaveLength(MAX_TOOL_SKILLS);
  });
});
