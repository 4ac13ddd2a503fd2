// Reads a multi-process test makes of a fleet whose nodes come and go: ask each live node in
// turn, and take the first answer. Shared by the coding-runs and approvals fleet tests.
import { expect } from "bun:test";
import { waitFor, type Fleet, type FleetNode } from "./fleet.ts";

export function fleetReads(fleet: () => Fleet) {
  const live = () => fleet().nodes.filter((n) => n.proc !== null && n.proc.exitCode === null && !n.proc.killed);

  /** A GET's JSON, or null when the node does not answer 2xx. */
  async function json<T>(n: FleetNode, path: string): Promise<T | null> {
    try {
      const res = await n.get(path);
      return res.ok ? ((await res.json()) as T) : null;
    } catch {
      return null;
    }
  }

  /** The live node holding `seat` (its /health says so), or null. */
  async function holder(seat: string): Promise<FleetNode | null> {
    for (const n of live()) {
      const h = await json<{ seats?: { held?: string[] } }>(n, "/health");
      if (h?.seats?.held?.includes(seat)) return n;
    }
    return null;
  }

  /** The message `root` of #general and its replies, from the first live node that answers. */
  async function thread(root: string): Promise<{ author: string; body: string }[]> {
    for (const n of live()) {
      const page = await json<{ messages: { id: string; thread_parent: string | null; author: string; body: string }[] }>(n, "/chat/channels/general/messages?limit=500");
      if (page) return page.messages.filter((m) => m.id === root || m.thread_parent === root);
    }
    return [];
  }

  /** A person's post in #general (a reply when thread_parent is given); its message id. */
  async function post(n: FleetNode, body: string, thread_parent?: string): Promise<string> {
    const res = await n.post("/chat/channels/general/messages", { body, author: "founder", ...(thread_parent ? { thread_parent } : {}) });
    expect(res.status).toBeLessThan(300);
    return ((await res.json()) as { message_id: string }).message_id;
  }

  /**
   * Every live node's broker current on each replica it hosts (nats-server's full /healthz).
   * Only then is a kill -9 of one member a single failure: a member restarted a moment ago
   * may still be catching up a group the victim leads, which then has no quorum.
   */
  async function brokersCurrent(within_ms = 60_000): Promise<void> {
    await Promise.all(
      live().map((n) =>
        waitFor(`${n.id}'s broker current on its replicas`, async () => ((await fetch(`http://127.0.0.1:${n.monitorPort}/healthz`).catch(() => null))?.ok ? true : null), within_ms),
      ),
    );
  }

  /** kill -9 of `h` once the others are current, then the node that holds `seat` after it. */
  async function kill9AndWaitForMove(h: FleetNode, seat: string): Promise<FleetNode> {
    await brokersCurrent();
    h.kill("SIGKILL");
    await h.exited();
    return waitFor(`another node holding @${seat}`, async () => {
      const n = await holder(seat);
      return n && n.id !== h.id ? n : null;
    }, 60_000);
  }

  return { live, json, holder, thread, post, brokersCurrent, kill9AndWaitForMove };
}
