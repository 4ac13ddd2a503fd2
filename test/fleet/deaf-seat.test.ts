// A deaf seat on a real `crewlet run` process (issue 11): one member, two seats, the
// deaf-seat watch at test cadences (the `testing` block). The seat's inbox consumer is set
// beyond the stream's last sequence through the node's own sidecar — every new message
// lands behind it, the counters read healthy, only the probe can tell. The node must say
// so (/ready 503 naming the seat, GET /fleet listing it on its node), heal it (the rewind
// delivers the message sent while deaf, which is then answered), and read ready again; the
// other seat is never reported, and no probe reaches an agent.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { connect } from "nats";
import { durableName, mailbox, mailboxStream } from "../../src/queue/topics.ts";
import { makeFleet, waitFor as waitUntil, type Fleet, type FleetNode } from "../support/fleet.ts";

/** Generous: a loaded 2-core box boots and answers in well under this. */
const WAIT_MS = 90_000;

let fleet: Fleet;
let a: FleetNode;
beforeAll(async () => {
  fleet = await makeFleet({
    nodes: [{ id: "a", kind: "member" }],
    leaseTtlSeconds: 3,
    company: {
      name: "Deaf Co",
      default_llm: "script",
      providers: { llm: { script: { type: "scripted", rules: [{ reply: "ok {{text}}" }] } } },
      roles: [
        { name: "Deafy", handle: "deafy" },
        { name: "Fine", handle: "fine" },
      ],
    },
    // Checks every 3 s (a deaf verdict stays up at least one check, longer than a heartbeat,
    // so GET /fleet can show it), a probe per seat every 2 s, deaf after 6 s ready and unheard.
    testing: { mailbox_check_seconds: 3, mailbox_probe_seconds: 2, mailbox_probe_heard_seconds: 6 },
  });
  a = fleet.node("a");
  await a.start();
  await a.waitReady(WAIT_MS);
}, 180_000);
afterAll(async () => {
  await fleet?.stop();
});

const waitFor = <T>(what: string, probe: () => Promise<T | null | undefined>) => waitUntil(what, probe, WAIT_MS);

async function post(body: string): Promise<string> {
  const res = await a.post("/chat/channels/general/messages", { body, author: "founder" });
  expect([200, 202]).toContain(res.status);
  const json = (await res.json()) as { message_id?: string; op_id?: string };
  return (json.message_id ?? json.op_id)!;
}

async function answered(id: string, by: string): Promise<true | null> {
  const res = await a.get("/chat/channels/general/messages?limit=500");
  if (!res.ok) return null;
  const { messages } = (await res.json()) as { messages: { author: string; thread_parent: string | null }[] };
  return messages.some((m) => m.thread_parent === id && m.author === by) ? true : null;
}

test("a seat whose consumer stands beyond the stream: /ready 503 naming it, GET /fleet shows it, healed, answering", async () => {
  await waitFor("both seats held", async () => {
    const v = (await (await a.get("/fleet")).json()) as { leases: { handle: string }[] };
    return v.leases.length === 2 ? true : null;
  });
  const first = await post("@deafy hello");
  await waitFor("deafy answers", () => answered(first, "deafy"));

  // Deafen: the consumer's pointer set past the end of the stream.
  const nc = await connect({ servers: `nats://127.0.0.1:${a.clientPort}`, ...a.natsAuth(), reconnect: false, name: "deaf-seat-test" });
  try {
    const last = (await (await nc.jetstreamManager()).streams.info(mailboxStream("deafy"))).state.last_seq;
    const reply = await nc.request(`$JS.API.CONSUMER.RESET.${mailboxStream("deafy")}.${durableName(mailbox("deafy", "inbox").group)}`, JSON.stringify({ seq: last + 1_000 }));
    expect(new TextDecoder().decode(reply.data)).not.toContain('"error"');
  } finally {
    await nc.close();
  }
  const whileDeaf = await post("@deafy are you there");

  // Reported: /ready names the seat, and the fleet view lists it on its node.
  const reason = await waitFor("/ready says deafy is deaf", async () => {
    const res = await a.get("/ready");
    const body = (await res.json()) as { reason?: string };
    return res.status === 503 && body.reason?.includes("deafy") ? body.reason : null;
  });
  expect(reason).toBe("seat_mailbox_deaf: deafy");
  const shown = await waitFor("GET /fleet shows deafy deaf", async () => {
    const v = (await (await a.get("/fleet")).json()) as { nodes: { id: string; seat_mailbox_deaf: string[] }[] };
    const deaf = v.nodes.find((n) => n.id === "a")?.seat_mailbox_deaf ?? [];
    return deaf.length > 0 ? deaf : null;
  });
  expect(shown).toEqual(["deafy"]);

  // Healed: the message sent while deaf is answered, the node ready again, new mail answered.
  await waitFor("the message sent while deaf is answered", () => answered(whileDeaf, "deafy"));
  await waitFor("ready again", async () => ((await a.get("/ready")).status === 200 ? true : null));
  const after = await post("@deafy and now");
  await waitFor("deafy answers again", () => answered(after, "deafy"));

  const alarms = a.events("seat_mailbox_deaf");
  expect(alarms.map((l) => [l.seat, l.reason])).toEqual([["deafy", "probe_unheard"]]);
  expect(a.events("seat_mailbox_hearing").map((l) => [l.seat, l.healed_by])).toEqual([["deafy", "rewind"]]);
  expect(a.events("seat_probe_heard").length).toBeGreaterThan(0);
  // No probe ever reached an agent as a trigger.
  expect(a.events("inbox_trigger_invalid")).toEqual([]);
}, 240_000);
