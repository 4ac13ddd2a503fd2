// `crewlet agents pause|resume|stop <handle>` against a live `crewlet run` process (real
// nats-server, a scripted OpenAI-wire endpoint): pause and resume change the fleet's state
// GET /agents shows and say so in words and --json, a second pause says it already was;
// stop ends the turn in flight after the round the endpoint is answering (the next call is
// never made, the thread is told "stopped by test"); a wrong token and a bad handle or
// action are refused with the reason and a non-zero exit.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { resolve } from "node:path";
import { openAiTextReply, openAiToolReply, startModelServer, type ModelServer } from "../agent/model-server.ts";
import { makeFleet, TEST_TOKEN, waitFor as waitUntil, type Fleet, type FleetNode } from "../support/fleet.ts";

const WAIT_MS = 60_000;
/** The first model round of the stopped turn takes this long: time to send the stop. */
const SLOW_ROUND_MS = 4_000;

let server: ModelServer;
let fleet: Fleet;
let node: FleetNode;
beforeAll(async () => {
  server = startModelServer();
  server.script([openAiTextReply("unused")]);
  fleet = await makeFleet({
    nodes: [{ id: "a", kind: "member" }],
    company: {
      name: "Controls Co",
      default_llm: "m",
      providers: { llm: { m: { type: "openai", base_url: server.url, model: "m", api_keys: ["sk-controls-0123456789abcdef"], stream: false } } },
      roles: [
        { name: "Boss", handle: "boss", kind: "human", manages: ["dev"] },
        { name: "Dev", handle: "dev" },
      ],
    },
  });
  node = fleet.node("a");
  await node.start();
  await node.waitReady(120_000);
}, 180_000);
afterAll(async () => {
  await fleet?.stop();
  server?.stop();
});

function crewlet(...args: string[]): { code: number; out: string; err: string } {
  const r = Bun.spawnSync([process.execPath, resolve(import.meta.dir, "../../src/main.ts"), ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode ?? -1, out: r.stdout.toString(), err: r.stderr.toString() };
}
const agents = (...args: string[]) => crewlet("agents", ...args, "--url", node.apiUrl, "--token", TEST_TOKEN);

const waitFor = <T>(what: string, probe: () => Promise<T | null | undefined>) =>
  waitUntil(what, probe, WAIT_MS, () => node.log().split("\n").filter((l) => /turn_|stop|error/.test(l)).slice(-30).join("\n"));

const pausedBy = async () => ((await (await node.get("/agents/dev")).json()) as { paused: { by: string } | null }).paused?.by ?? null;

test("pause and resume through the CLI change the fleet's state and say so", async () => {
  const p = agents("pause", "dev", "--json");
  expect(p.code).toBe(0);
  expect(JSON.parse(p.out)).toMatchObject({ handle: "dev", paused: { by: "test" }, changed: true });
  expect(await pausedBy()).toBe("test");
  const again = agents("pause", "dev");
  expect(again.code).toBe(0);
  expect(again.out.trim()).toBe("@dev paused (it already was)");
  const r = agents("resume", "dev");
  expect(r.code).toBe(0);
  expect(r.out.trim()).toBe("@dev resumed");
  expect(await pausedBy()).toBeNull();
  expect(JSON.parse(agents("resume", "dev", "--json").out)).toMatchObject({ handle: "dev", paused: null, changed: false });
});

test("stop through the CLI ends the turn in flight after its round: the next call is never made, the thread told who stopped it", async () => {
  server.script([
    { ...openAiToolReply([{ id: "c1", name: "no_such_tool", args: {} }]), delay_ms: SLOW_ROUND_MS },
    openAiTextReply("SHOULD-NOT-BE-SAID"),
  ]);
  const before = server.requests.length;
  const posted = await node.post("/chat/channels/general/messages", { body: "@dev look into it", author: "boss" });
  expect(posted.status).toBeLessThan(300);
  await waitFor("the first round reached the endpoint", async () => (server.requests.length > before ? true : null));
  const s = agents("stop", "dev");
  expect(s.code).toBe(0);
  expect(s.out.trim()).toBe("stop requested for @dev: its turn in flight ends at its next fence check");
  const notice = await waitFor("the thread told", async () => {
    const res = await node.get("/chat/channels/general/messages?limit=500");
    const msgs = ((await res.json()) as { messages: { author: string; body: string }[] }).messages;
    return msgs.find((m) => m.author === "dev" && m.body.includes("stopped by test")) ?? null;
  });
  expect(notice.body).toContain("stopped by test");
  const msgs = ((await (await node.get("/chat/channels/general/messages?limit=500")).json()) as { messages: { body: string }[] }).messages;
  expect(msgs.some((m) => m.body.includes("SHOULD-NOT-BE-SAID"))).toBe(false);
  // The turn's second call was never made (a reflection after the turn would not carry the tool result).
  const turnCalls = server.requests.slice(before).filter((r) => JSON.stringify(r.body).includes("no_such_tool"));
  expect(turnCalls).toHaveLength(0);
}, 120_000);

test("refused: a wrong token (the API's reason), an unknown action or a bad handle (usage)", () => {
  const wrong = crewlet("agents", "pause", "dev", "--url", node.apiUrl, "--token", "not-the-token-0123456789abcdef");
  expect(wrong.code).toBe(1);
  expect(wrong.err).toContain("crewlet agents pause:");
  const bad = agents("freeze", "dev");
  expect(bad.code).toBe(2);
  expect(bad.err).toContain('unknown agents command "freeze"');
  const handle = agents("stop", "Not A Handle");
  expect(handle.code).toBe(2);
  expect(handle.err).toContain("a seat handle is required");
  const unknown = agents("pause", "nobody");
  expect(unknown.code).toBe(1);
  expect(unknown.err).toContain("nobody");
});
