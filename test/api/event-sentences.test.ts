// The Events view's sentences (src/api/dashboard/event-sentences.js), by table: each event
// the engine publishes reads as words with its seat, its asker and its place; a seat's
// claim says where it came from and why; an unknown event is still shown, plainly.
import { expect, test } from "bun:test";
import { describeEvent, details, place, seatTracker, type Level } from "../../src/api/dashboard/event-sentences.js";

const cases: [string, Record<string, unknown>, string, Level][] = [
  ["turn_started", { seat: "cto", conversation: "chat:general:m1", from: "ana" }, "cto is answering ana in #general", "info"],
  ["turn_started", { seat: "cto", conversation: "work:ENG-4", from: "ceo" }, "cto started a turn on ENG-4 for ceo", "info"],
  ["turn_started", { seat: "pm", conversation: "schedule:standup", from: "scheduler" }, "pm started a turn on schedule standup for scheduler", "info"],
  ["turn_completed", { seat: "cto", conversation: "chat:general:m1", from: "ana", outcome: "completed", rounds: 2, tool_calls: 1, tokens: { input: 1000, output: 234 } }, "cto answered ana in #general (2 rounds, 1 tool call, 1,234 tokens)", "ok"],
  ["turn_completed", { seat: "cto", conversation: "chat:dm.ana.cto:m1", from: "ana", outcome: "completed", rounds: 1 }, "cto answered ana in a direct message (1 round)", "ok"],
  ["turn_completed", { seat: "cto", conversation: "work:ENG-4", from: "ceo", outcome: "completed" }, "cto finished a turn on ENG-4 for ceo", "ok"],
  ["turn_completed", { seat: "cto", conversation: "chat:general:m1", from: "ana", outcome: "failed", error: "the model endpoint refused the API key (401)" }, "cto could not answer ana in #general: the model endpoint refused the API key (401)", "error"],
  ["turn_completed", { seat: "cto", conversation: "work:ENG-4", outcome: "retry", error: "HTTP 503" }, "cto's turn on ENG-4 failed and will be retried: HTTP 503", "warn"],
  ["turn_completed", { seat: "cto", outcome: "budget_exhausted", from: "ana", conversation: "chat:general:x" }, "cto is out of budget and did not answer ana in #general", "error"],
  ["turn_completed", { seat: "cto", outcome: "stopped" }, "cto's turn was stopped", "warn"],
  ["turn_completed", { seat: "cto", outcome: "something_new" }, "cto's turn ended: something new", "info"],
  ["tool_called", { seat: "cto", tool: "work_create", ok: true }, "cto used work_create", "info"],
  ["tool_called", { seat: "cto", tool: "web_fetch", ok: false }, "cto's call to web_fetch failed", "warn"],
  ["turn_trigger_skipped", { seat: "ceo", type: "chat_mention", reason: "already_completed" }, "ceo skipped a chat mention (already completed)", "info"],
  ["turn.guard_breach", { seat: "ceo", kind: "unhandled_exception", error: "boom" }, "ceo's turn broke a guard (unhandled exception): boom", "error"],
  ["turn_failure_told", { seat: "cto", channel: "general", text: "⚠ …" }, "cto told the asker in #general that it could not answer", "error"],
  ["provider_key_ready", { provider: "openai", key_id: "openai.ab12" }, "openai API key openai.ab12 is ready again", "ok"],
  ["budget_alert", { scope: "seat cto", window: "daily", fraction: 0.8123 }, "seat cto has used 81% of its daily budget", "warn"],
  ["skill_state_changed", { seat: "cto", skill: "s1", name: "invoice, refund", from: null, to: "active" }, 'cto learned the skill "invoice, refund"', "ok"],
  ["skill_state_changed", { seat: "cto", skill: "s1", name: "invoice, refund", from: "active", to: "stale" }, 'cto\'s skill "invoice, refund" went from active to stale', "info"],
  ["seat_detached", { seat: "cto", node: "node-a", reason: "drain", mode: "voluntary" }, "seat cto was let go by node-a (drain)", "info"],
  ["seat_detached", { seat: "cto", node: "node-a", reason: "lost", mode: "fenced" }, "seat cto was let go by node-a (lost, fenced)", "warn"],
  ["turn_stop_requested", { seat: "cto", by: "token:ops", node: "a" }, "token:ops stopped cto's turn", "warn"],
  ["budget_unknown", { seat: "cto", error: "timeout" }, "cto's budget could not be read (timeout); it waits before calling its model", "warn"],
  ["seat_orphan_released", { seat: "cto", node: "node-a" }, "node-a let go of seat cto, left over from before it restarted", "info"],
  ["sandbox_run_started", { seat: "engineer", run: "1a2b3c4d-xx", engine: "claude", node: "a" }, "engineer started a coding run 1a2b3c4d with claude on a", "info"],
  ["sandbox_run_parked", { seat: "engineer", run: "1a2b3c4d-xx", seq: 1 }, "engineer's coding run 1a2b3c4d asked a question and waits for an answer", "warn"],
  ["approval_requested", { seat: "engineer", tool: "deploy", rule: "deploys" }, 'engineer asks a person\'s approval to call deploy (rule "deploys")', "warn"],
  ["approval_call_ran", { seat: "engineer", tool: "deploy", ok: true }, "engineer's approved call to deploy ran", "ok"],
  ["approval_call_ran", { seat: "engineer", tool: "deploy", ok: false }, "engineer's approved call to deploy ran and failed", "warn"],
  ["tool_parked", { seat: "engineer", tool: "deploy" }, "engineer waits for approval before deploy", "info"],
  ["sandbox_answer_given", { seat: "engineer", run: "1a2b3c4d-xx", by: "ana", seq: 1 }, "ana answered engineer's coding run 1a2b3c4d", "info"],
  ["sandbox_run_finished", { seat: "engineer", run: "1a2b3c4d-xx", outcome: "succeeded" }, "engineer's coding run 1a2b3c4d finished", "ok"],
  ["sandbox_run_failed", { seat: "engineer", run: "1a2b3c4d-xx", outcome: "limit", reason: "wall time limit of 60 s reached" }, "engineer's coding run 1a2b3c4d was stopped at a limit: wall time limit of 60 s reached", "error"],
  ["sandbox_run_failed", { seat: "engineer", run: "1a2b3c4d-xx", reason: "seat_removed" }, "engineer's coding run 1a2b3c4d was ended: the seat was removed", "warn"],
  ["something_else", { event: "something_else", at: 1, seat: "cto", n: 3, deep: { a: 1 } }, 'something_else @cto n=3 deep={"a":1}', "info"],
];

test.each(cases)("%s %o reads %p", (name, body, text, level) => {
  expect(describeEvent(name, body)).toEqual({ text, level });
});

test("a claim says where the seat came from and why; a failover is the claimant's own event", () => {
  const seats = seatTracker();
  const say = (name: string, body: Record<string, unknown>) => describeEvent(name, body, seats.observe(name, body));
  expect(say("seat_claimed", { seat: "agent-03", node: "a" }).text).toBe("seat agent-03 was taken up by a");
  expect(say("seat_claimed", { seat: "agent-03", node: "b" })).toEqual({ text: "seat agent-03 moved from a to b", level: "info" });
  expect(say("seat_failover", { seat: "agent-03", node: "b", from: "a", epoch: 2 })).toEqual({ text: "seat agent-03 failed over from a to b: a never let it go", level: "warn" });
  expect(say("seat_detached", { seat: "agent-03", node: "b", reason: "drain", mode: "voluntary" }).text).toBe("seat agent-03 was let go by b (drain)");
  expect(say("seat_claimed", { seat: "agent-03", node: "c" })).toEqual({ text: "seat agent-03 moved from b to c (drain)", level: "info" });
  expect(say("seat_claimed", { seat: "agent-03", node: "c" }).text).toBe("seat agent-03 was taken up by c");
});

test("places and details", () => {
  expect(place("chat:eng:m1")).toBe("in #eng");
  expect(place("github:gh:42")).toBe("from gh (github)");
  expect(place(undefined)).toBe("");
  expect(details({ event: "x", at: 5, seat: "cto", tokens: { input: 1 } })).toEqual(["at: 5", "seat: cto", 'tokens: {"input":1}']);
});
