import { afterAll, beforeAll, expect, test } from "bun:test";
import { systemClock } from "../../src/clock.ts";
import { memoryLogger } from "../../src/log.ts";
import { MemoryEventSink } from "../../src/agent/events.ts";
import { openAiProvider } from "../../src/agent/providers/openai.ts";
import { buildProviders } from "../../src/agent/providers/index.ts";
import { TurnEngine } from "../../src/agent/turn.ts";
import { buildOrg } from "../../src/org/org.ts";
import { decodeTrigger, type Trigger } from "../../src/org/trigger.ts";
import { MemoryQueue } from "../../src/queue/memory.ts";
import { mailbox } from "../../src/queue/topics.ts";
import { LocalEstate, rootCompany } from "./support.ts";
import { openAiTextReply, openAiToolReply, startModelServer, type ModelServer } from "./model-server.ts";

const company = rootCompany();
const org = buildOrg(company);
const { log } = memoryLogger("warn");
let server: ModelServer;
let estate: LocalEstate;
let queue: MemoryQueue;
beforeAll(() => {
  server = startModelServer();
  estate = new LocalEstate(company);
  queue = new MemoryQueue({ clock: systemClock, log });
});
afterAll(async () => {
  server.stop();
  estate.close();
  await queue.close();
});

async function take(handle: string): Promise<Trigger> {
  const { subject, group } = mailbox(handle, "inbox");
  let got: Trigger | null = null;
  const att = await queue.attach(subject, group, async (d) => {
    const t = decodeTrigger(d.data);
    if (t.ok) got = t.trigger;
    return { kind: "ack" };
  });
  for (let i = 0; i < 200 && got === null; i++) await Bun.sleep(5);
  await att.detach();
  if (got === null) throw new Error(`nothing arrived in ${handle}'s inbox`);
  return got;
}

test("ask_colleague sends an a2a_request to the colleague's inbox; the answer comes back as an a2a_message", async () => {
  await queue.ensureStreams();
  for (const h of ["cto", "pm"]) await queue.ensureMailbox(mailbox(h, "inbox").subject, mailbox(h, "inbox").group);
  const providers = buildProviders(company.providers.llm, systemClock);
  const engine = (provider?: ReturnType<typeof openAiProvider>) =>
    new TurnEngine({
      org: () => org,
      node_id: "node-a",
      clock: systemClock,
      log,
      estate,
      queue,
      providerFor: (s) => provider ?? providers.get(s.llm ?? ""),
      ledger: null,
      events: new MemoryEventSink(),
    });
  server.script([openAiToolReply([{ id: "c1", name: "ask_colleague", args: { handle: "pm", question: "ETA for OPS-1?" } }]), openAiTextReply("Asked @pm.")]);
  const task: Trigger = { type: "task_assigned", event_id: "task:ENG-9:cto", seat: "cto", conversation: "work:ENG-9", from: "ceo", text: "plan", refs: {}, created_at: 1 };
  const asked = await engine(openAiProvider({ name: "gpt", base_url: server.url, model: "m", api_keys: [], timeout_ms: 5_000, clock: systemClock })).run({ seat: "cto", epoch: 1, fence: () => true, triggers: [task] });
  expect(asked).toMatchObject({ settle: "ack", outcome: "completed", reached_outside: true });

  const request = await take("pm");
  expect(request).toMatchObject({ type: "a2a_request", seat: "pm", from: "cto", text: "ETA for OPS-1?" });
  expect(request.conversation).toMatch(/^a2a:/);

  const answered = await engine().run({ seat: "pm", epoch: 1, fence: () => true, triggers: [request] });
  expect(answered.final_text).toBe("Noted, @cto. (pm)");
  const answer = await take("cto");
  expect(answer).toMatchObject({ type: "a2a_message", seat: "cto", from: "pm", conversation: request.conversation, text: "Noted, @cto. (pm)" });
});
