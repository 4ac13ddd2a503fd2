// A store or estate that does not answer is "not now" (503 with Retry-After, the cause in
// words), never a 500: the chaos runs saw GET /fleet answer 500 while the lease bucket
// elected a leader.
import { expect, test } from "bun:test";
import { Hono } from "hono";
import { createApp, RETRY_AFTER_SECONDS, unavailableAnswer } from "../../src/api/app.ts";
import { TokenAuth, type AuthEnv } from "../../src/api/auth.ts";
import { StoreUnavailable } from "../../src/coord/contract.ts";
import { GRANTS } from "../../src/config/tier-a.ts";
import { EstateUnavailable } from "../../src/estate/router.ts";
import { memoryLogger } from "../../src/log.ts";

const OPS = "ops-token-0123456789abcdefghij";
const H = { authorization: `Bearer ${OPS}` };

test.each([
  ["a lease store with no leader", new StoreUnavailable("list crewlet_leases node.>: 503"), "store_unavailable"],
  ["no data node", new EstateUnavailable("read chat", { a: "not reachable" }), "estate_unavailable"],
  ["a closing connection", Object.assign(new Error("closed"), { code: "CONNECTION_CLOSED" }), "unavailable"],
  ["a defect", new TypeError("x is undefined"), null],
] as const)("%s", (_what, err, code) => {
  expect(unavailableAnswer(err)?.code ?? null).toBe(code);
});

test("a route whose store does not answer is a 503 naming it, logged as api_unavailable; a defect is still a 500", async () => {
  const { log, sink } = memoryLogger();
  const routes = () => {
    const app = new Hono<AuthEnv>();
    app.get("/store", () => {
      throw new StoreUnavailable("list crewlet_leases node.>: 503");
    });
    app.get("/defect", () => {
      throw new TypeError("x is undefined");
    });
    return app;
  };
  const app = createApp({ auth: new TokenAuth([{ id: "ops", token: OPS, grants: GRANTS }]), log, health: { health: () => ({ ok: true }), notReadyReason: () => null }, groups: [{ prefix: "/t", routes }] });
  const res = await app.request("/t/store", { headers: H });
  expect(res.status).toBe(503);
  expect(res.headers.get("retry-after")).toBe(String(RETRY_AFTER_SECONDS));
  const body = (await res.json()) as { error: { code: string; message: string } };
  expect(body.error.code).toBe("store_unavailable");
  expect(body.error.message).toContain("crewlet_leases");
  expect(sink.lines.filter((l) => l.event === "api_unavailable")).toHaveLength(1);
  expect((await app.request("/t/defect", { headers: H })).status).toBe(500);
  expect(sink.lines.filter((l) => l.event === "api_internal_error")).toHaveLength(1);
});
