// Helpers for end-to-end tests that talk to a running node over its API.
import { TEST_TOKEN } from "../support/fleet.ts";

export async function api(url: string, path: string, init: { method?: string; body?: unknown; token?: string } = {}): Promise<{ status: number; json: any }> {
  const res = await fetch(`${url}${path}`, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers: {
      authorization: `Bearer ${init.token ?? TEST_TOKEN}`,
      ...(init.body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

/** Polls until `check` returns a value, or throws naming what it waited for. */
export async function until<T>(what: string, check: () => Promise<T | null | undefined | false>, timeout_ms = 20_000): Promise<T> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout_ms} ms waiting for ${what}`);
    await Bun.sleep(100);
  }
}

/** The root crewlet.yaml's scenario: ask @ceo for a plan; a reply lands in the thread and
 * @cto and @pm get work items they pick up. Returns what it saw. */
export async function askCeoForAPlan(url: string, token?: string) {
  const posted = await api(url, "/chat/channels/general/messages", {
    body: { body: "@ceo please make a plan for the warehouse pilot", author: "founder" },
    token,
  });
  if (posted.status !== 200 && posted.status !== 202) throw new Error(`post answered ${posted.status}: ${JSON.stringify(posted.json)}`);
  const messageId: string = posted.json.message_id;
  const reply = await until("@ceo's reply in the thread", async () => {
    const { json } = await api(url, "/chat/channels/general/messages", { token });
    return (json?.messages ?? []).find((m: any) => m.thread_parent === messageId && m.author === "ceo");
  });
  const items = await until("work items for @cto and @pm, picked up", async () => {
    const { json } = await api(url, "/work", { token });
    const list: any[] = json?.items ?? [];
    const cto = list.find((w) => w.assignee === "cto" && w.status === "in_progress");
    const pm = list.find((w) => w.assignee === "pm" && w.status === "in_progress");
    return cto && pm ? list : null;
  });
  return { messageId, reply, items };
}
