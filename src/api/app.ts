// The Hono app: middleware composed in one visible place, one file per route group.
// /health and /ready are open; every other route declares the grant it needs.
//
// In order: a node that cannot serve (booting, stopping) answers 503 with Retry-After on
// every route but the probes; an Idempotency-Key is honoured on every write route; the
// groups; and what matches no route is 405 (the path exists under other methods — whatever
// the method, PROPFIND included — with Allow), 404 (unknown path) or 501 (an unknown path
// asked with a method this API implements nowhere). A method Bun's HTTP parser does not
// know (BREW, lower-case get) never reaches here: Bun closes the connection without an
// answer (oven-sh/bun#6556; README "Security"; test/api/routes-fuzz.test.ts pins it). An error that
// is the node's own unavailability (its NATS connection closing, its estate closed under a
// stop) is a 503 with Retry-After, never a 500.
import { Hono, type Context } from "hono";
import { StoreUnavailable, type KvSlot } from "../coord/contract.ts";
import { EstateUnavailable } from "../estate/router.ts";
import type { Logger } from "../log.ts";
import { TokenAuth, type AuthEnv } from "./auth.ts";
import { audited } from "./audit.ts";
import { ApiError } from "./errors.ts";
import { idempotency, routePath } from "./idempotency.ts";
import { healthRoutes, type HealthSource } from "./routes/health.ts";

export interface RouteGroup {
  /** Mount point, e.g. "/work". */
  prefix: string;
  routes: (auth: TokenAuth) => Hono<AuthEnv>;
}

export interface AppOptions {
  auth: TokenAuth;
  log: Logger;
  health: HealthSource;
  groups?: RouteGroup[];
  /**
   * Why this node cannot serve routes right now ("starting", "stopping"), or null. Probes
   * are always served; everything else answers 503 with Retry-After meanwhile.
   */
  unavailable?: () => { code: "starting" | "stopping"; message: string } | null;
  /** Where first answers to Idempotency-Key requests are remembered (fleet-wide); null: op ids only. */
  idempotencySlot?: KvSlot | null;
  /** Every write request's who/what/outcome, once answered (src/node/audit.ts). */
  audit?: (e: { token_id: string | null; method: string; path: string; status: number; detail?: string | null }) => void;
}

/**
 * What a 503 tells a client to wait before trying again: a boot step, a stream leader
 * election (~4 s) or a drain's hand-off is over in a few seconds, and another node may
 * answer at once.
 */
export const RETRY_AFTER_SECONDS = 5;

/** Methods this API implements on some route (HEAD and OPTIONS are answered by Hono/Bun for GET routes). */
const IMPLEMENTED_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]);

const PROBES = new Set(["/health", "/ready"]);

/**
 * Whether an error is this node being unable to serve rather than a fault: its NATS
 * connection closing or closed, or its estate database closed by a stop in progress.
 */
export function isUnavailableError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === "CONNECTION_CLOSED" || code === "CONNECTION_DRAINING" || code === "DISCONNECT" || code === "CONNECTION_REFUSED") return true;
  const message = (err as Error | null)?.message ?? "";
  return /Cannot use a closed database|connection (?:closed|draining)/i.test(message);
}

/**
 * The 503 an error means, or null for a defect (a 500). A store or estate that did not
 * answer (an election, a member cut off) is "not now", as is this node closing. Pure.
 */
export function unavailableAnswer(err: unknown): { code: string; message: string } | null {
  if (err instanceof StoreUnavailable) return { code: "store_unavailable", message: `the fleet's coordination store did not answer (${err.message}); try again in a moment` };
  if (err instanceof EstateUnavailable) return { code: "estate_unavailable", message: `the company's records did not answer (${err.message}); try again in a moment` };
  if (isUnavailableError(err)) return { code: "unavailable", message: "this node cannot serve the request right now (its broker connection or estate is closing); try again or ask another node" };
  return null;
}

function unavailableResponse(c: Context, code: string, message: string): Response {
  c.header("Retry-After", String(RETRY_AFTER_SECONDS));
  return c.json({ error: { code, message } }, 503);
}

/** A route's path pattern as a regex over request paths (`:param` is one segment). */
function pathRegex(pattern: string): RegExp {
  const body = pattern
    .split("/")
    .map((seg) => (seg.startsWith(":") ? "[^/]+" : seg === "*" ? ".*" : seg.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
    .join("/");
  return new RegExp(`^${body}/?$`);
}

/** Every (method, path pattern) the app routes, once each (middleware rows left out). */
export function routeTable(app: Hono<AuthEnv>): { method: string; path: string }[] {
  const seen = new Map<string, { method: string; path: string }>();
  for (const r of app.routes) if (r.method !== "ALL") seen.set(`${r.method} ${r.path}`, { method: r.method, path: r.path });
  return [...seen.values()];
}

export function createApp(opts: AppOptions): Hono<AuthEnv> {
  // Not strict: "/work/" is "/work", as the 405 table already reads it (pathRegex).
  const app = new Hono<AuthEnv>({ strict: false });
  app.onError((err, c) => {
    if (err instanceof ApiError) {
      if (err.status === 503) c.header("Retry-After", String(RETRY_AFTER_SECONDS));
      return c.json(err.body(), err.status);
    }
    const unavailable = unavailableAnswer(err);
    if (unavailable) {
      opts.log.warn("api_unavailable", { method: c.req.method, path: c.req.path, error: err });
      return unavailableResponse(c, unavailable.code, unavailable.message);
    }
    opts.log.error("api_internal_error", { method: c.req.method, path: c.req.path, error: err });
    return c.json({ error: { code: "internal", message: "internal error; see the node log" } }, 500);
  });
  app.use("*", async (c, next) => {
    const why = PROBES.has(routePath(c.req.path)) ? null : (opts.unavailable?.() ?? null);
    if (why) return unavailableResponse(c, why.code, why.message);
    await next();
  });
  if (opts.audit) {
    const audit = opts.audit;
    app.use("*", async (c, next) => {
      await next();
      if (!audited(c.req.method)) return;
      try {
        // A request no route took (404, 405) still names the token it presented, if valid.
        const tokenId = c.get("principal")?.tokenId ?? opts.auth.identify(c.req.header("authorization"))?.tokenId ?? null;
        audit({ token_id: tokenId, method: c.req.method, path: c.req.path, status: c.res.status, detail: c.get("audit_detail") ?? null });
      } catch (err) {
        opts.log.error("audit_append_failed", { method: c.req.method, path: c.req.path, error: err as Error });
      }
    });
  }
  app.use("*", idempotency({ auth: opts.auth, slot: opts.idempotencySlot ?? null, log: opts.log }));
  app.route("/", healthRoutes(opts.health));
  for (const g of opts.groups ?? []) app.route(g.prefix, g.routes(opts.auth));
  const table = routeTable(app);
  // What this node serves, once: the route-fuzz test enumerates it (every route is fuzzed).
  opts.log.debug("api_routes", { routes: table.map((r) => `${r.method} ${r.path}`) });
  const routes = table.map((r) => ({ method: r.method, re: pathRegex(r.path) }));
  app.notFound((c) => {
    const method = c.req.method.toUpperCase();
    const allowed = [...new Set(routes.filter((r) => r.re.test(c.req.path)).map((r) => r.method))].sort();
    if (allowed.length > 0) {
      c.header("Allow", allowed.join(", "));
      return c.json({ error: { code: "method_not_allowed", message: `${c.req.method} is not allowed on ${c.req.path}; allowed: ${allowed.join(", ")}` } }, 405);
    }
    if (!IMPLEMENTED_METHODS.has(method)) {
      return c.json({ error: { code: "not_implemented", message: `method ${c.req.method} is not implemented by this API` } }, 501);
    }
    return c.json({ error: { code: "not_found", message: `no route ${c.req.method} ${c.req.path}` } }, 404);
  });
  return app;
}
