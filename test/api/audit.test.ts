// The audit log (src/api/audit.ts): action names by route (pure, by table), and the store on
// a real SQLite database (in memory) — appended through the app's middleware with the
// token's id, paged newest first, trimmed past its horizon.
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { Hono } from "hono";
import { actionOf, AUDIT_RETENTION_MS, AuditLog } from "../../src/api/audit.ts";
import { createApp } from "../../src/api/app.ts";
import { TokenAuth, type AuthEnv } from "../../src/api/auth.ts";
import { auditGroup } from "../../src/api/routes/audit.ts";
import { memoryLogger } from "../../src/log.ts";

test.each([
  ["POST", "/agents/cto/pause", "agent.pause"],
  ["POST", "/agents/cto/resume", "agent.resume"],
  ["POST", "/agents/cto/stop", "agent.stop"],
  ["POST", "/fleet/drain", "fleet.drain"],
  ["POST", "/config/revisions/abc123/activate", "config.activate"],
  ["POST", "/deadletters/42/replay", "deadletter.replay"],
  ["DELETE", "/deadletters/42", "deadletter.delete"],
  ["POST", "/estate/chat/skip", "estate.skip"],
  ["POST", "/estate/chat/hold", "estate.hold"],
  ["POST", "/estate/tracker/release", "estate.release"],
  ["POST", "/chat/channels/general/messages", "write"],
  ["GET", "/agents/cto/pause", "write"],
])("%s %s → %s", (m, p, want) => expect(actionOf(m, p)).toBe(want));

test("every write is appended with its token id and status; GET /audit pages newest first; trim keeps the horizon", async () => {
  const db = new Database(":memory:", { strict: true });
  const audit = new AuditLog(db);
  let now = 1_000_000_000_000;
  const { log } = memoryLogger("warn");
  const auth = new TokenAuth([
    { id: "ops", token: "ops-token-0123456789abcdefgh", grants: ["state:read", "fleet:operate"] },
    { id: "reader", token: "reader-token-0123456789abcdef", grants: ["state:read"] },
  ]);
  const drain = {
    prefix: "/fleet",
    routes: (a: TokenAuth) => new Hono<AuthEnv>().post("/drain", a.require("fleet:operate"), (c) => c.json({ draining: true }, 202)),
  };
  const app = createApp({ auth, log, health: { health: () => ({}), notReadyReason: () => null }, groups: [drain, auditGroup(audit)], audit: (e) => audit.append({ ...e, at: now++ }) });
  const call = (method: string, path: string, token: string) => app.fetch(new Request(`http://x${path}`, { method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, ...(method === "GET" ? {} : { body: "{}" }) }));
  expect((await call("POST", "/fleet/drain", "ops-token-0123456789abcdefgh")).status).toBe(202);
  expect((await call("POST", "/fleet/drain", "reader-token-0123456789abcdef")).status).toBe(403);
  for (let i = 0; i < 3; i++) await call("POST", "/fleet/drain", "ops-token-0123456789abcdefgh");
  const first = await call("GET", "/audit?limit=2", "reader-token-0123456789abcdef");
  expect(first.status).toBe(200);
  const p1 = (await first.json()) as { entries: { id: number; token_id: string; action: string; status: number; outcome: string }[]; next: number | null };
  expect(p1.entries).toHaveLength(2);
  expect(p1.next).not.toBeNull();
  const p2 = (await (await call("GET", `/audit?limit=2&before=${p1.next}`, "reader-token-0123456789abcdef")).json()) as typeof p1;
  const p3 = (await (await call("GET", `/audit?limit=2&before=${p2.next}`, "reader-token-0123456789abcdef")).json()) as typeof p1;
  const all = [...p1.entries, ...p2.entries, ...p3.entries];
  expect(p3.next).toBeNull();
  expect(all).toHaveLength(5); // the GETs are not writes
  expect(all.map((e) => e.id)).toEqual([...all.map((e) => e.id)].sort((a, b) => b - a));
  expect(all[all.length - 1]).toMatchObject({ token_id: "ops", action: "fleet.drain", status: 202, outcome: "ok" });
  expect(all[all.length - 2]).toMatchObject({ token_id: "reader", action: "fleet.drain", status: 403, outcome: "refused" });
  expect((await call("GET", "/audit?limit=0", "reader-token-0123456789abcdef")).status).toBe(400);
  // Trim: only rows older than the horizon go.
  expect(audit.trim(now + AUDIT_RETENTION_MS - 2)).toBe(3);
  expect(audit.page({ limit: 10 }).entries).toHaveLength(2);
});
