// The CLI's writes carry an Idempotency-Key and are retried under the same key after a 503,
// a 504 or no answer; reads carry none and are not retried (issue 12, item 5).
import { afterAll, expect, test } from "bun:test";
import { MAX_BODY_BYTES } from "../../src/api/errors.ts";
import { apiRequest } from "../../src/cli/api-client.ts";

const seen: { method: string; key: string | null }[] = [];
let script: number[] = [];
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req) {
    seen.push({ method: req.method, key: req.headers.get("idempotency-key") });
    const status = script.shift() ?? 200;
    return Response.json(status >= 400 ? { error: { code: "x", message: `answered ${status}` } } : { status: "applied" }, { status });
  },
});
afterAll(() => server.stop(true));
const target = { url: `http://127.0.0.1:${server.port}`, token: "t".repeat(24) };

test("a write is retried after 504 and 503 under one key, and answers the retry's outcome", async () => {
  seen.length = 0;
  script = [504, 503, 200];
  const answer = await apiRequest(target, "POST", "/chat/channels/general/messages", { body: "hi" });
  expect(answer).toMatchObject({ ok: true, status: 200 });
  expect(seen.length).toBe(3);
  expect(seen[0]!.key).toMatch(/^[0-9a-f-]{36}$/);
  expect(new Set(seen.map((s) => s.key)).size).toBe(1);
});

test("a refusal is not retried; a read carries no key", async () => {
  seen.length = 0;
  script = [400];
  expect((await apiRequest(target, "POST", "/work", { title: 5 })).ok).toBe(false);
  expect(seen.length).toBe(1);
  seen.length = 0;
  script = [503];
  expect((await apiRequest(target, "GET", "/work")).ok).toBe(false);
  expect(seen).toEqual([{ method: "GET", key: null }]);
});

test("a body over the API's limit is refused before it is sent, naming its size and the limit", async () => {
  seen.length = 0;
  const answer = await apiRequest(target, "POST", "/config/revisions", { company: { name: "x".repeat(MAX_BODY_BYTES) } });
  expect(answer).toMatchObject({ ok: false, status: 413 });
  expect((answer as { message: string }).message).toMatch(new RegExp(`over the API's ${MAX_BODY_BYTES}-byte limit; nothing was sent`));
  expect(seen).toEqual([]);
});
