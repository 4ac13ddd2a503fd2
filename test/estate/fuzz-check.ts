// The write-route fuzzer's after-check (test/estate/fuzz.ts): every domain in service on
// every node, the copies level and alike, and every 2xx write readable as written on every
// node — the estate's records through its router; company revisions through GET
// /config/revisions/{digest} and the active one through GET /config/revisions; holds
// through GET /estate; pauses through GET /agents; stops in crewlet_controls; webhook
// deliveries on the notifications stream. And the figures a run prints.
import type { Hono } from "hono";
import type { JetStreamManager } from "nats";
import type { AuthEnv } from "../../src/api/auth.ts";
import { companySchema } from "../../src/config/company.ts";
import { digestTables } from "../../src/estate/digest.ts";
import { DOMAINS } from "../../src/estate/schema.ts";
import { decodeNotification, type Notification } from "../../src/integrations/notification.ts";
import { canonicalJson, companyDigest } from "../../src/config/company-revisions.ts";
import { STREAM_NOTIFICATIONS } from "../../src/queue/topics.ts";
import { FUZZ_TOKEN, type FuzzReport, type Readback } from "./fuzz.ts";
import type { FuzzNode } from "./fuzz-node.ts";

type App = Hono<AuthEnv>;

/** What a readback is keyed by: a later write to the same thing replaces the expectation. */
function readbackKey(rb: Readback): string {
  switch (rb.kind) {
    case "work":
      return `work:${rb.key}`;
    case "page":
      return `page:${rb.container}/${rb.title}`;
    case "active":
      return "active";
    case "hold":
      return `hold:${rb.domain}`;
    case "paused":
    case "stop":
      return `${rb.kind}:${rb.handle}`;
    case "revision":
      return `revision:${rb.digest}`;
    case "notification":
      return `notification:${rb.delivery}`;
    default:
      return `${rb.kind}:${rb.id}`;
  }
}

/**
 * Fleet state read through KV or a stream may lag a write on an R3 follower by a moment,
 * and a node's pause mirror follows a watch: a readback is retried this long before it
 * counts as a failure. Generous for a loaded 2-core box; a readback that is right returns
 * at once.
 */
const SETTLE_MS = 15_000;

async function settled(check: () => Promise<string[]>): Promise<string[]> {
  const deadline = performance.now() + SETTLE_MS;
  for (;;) {
    const problems = await check();
    if (problems.length === 0 || performance.now() > deadline) return problems;
    await Bun.sleep(200);
  }
}

async function getJson(app: App, path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await app.request(path, { headers: { authorization: `Bearer ${FUZZ_TOKEN}` } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Every notification on the stream, by delivery (the stream holds them until a handler acks). */
async function notifications(jsm: JetStreamManager): Promise<Map<string, Notification>> {
  const out = new Map<string, Notification>();
  const { state } = await jsm.streams.info(STREAM_NOTIFICATIONS);
  for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
    const m = await jsm.streams.getMessage(STREAM_NOTIFICATIONS, { seq }).catch(() => null);
    if (!m) continue;
    const d = decodeNotification(m.data);
    if (d.ok) out.set(d.notification.delivery, d.notification);
  }
  return out;
}

const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);

/** The readbacks of one node's fleet state (revisions, holds, pauses, stops, deliveries): problems, or []. */
async function fleetReadbacks(node: FuzzNode, latest: Readback[]): Promise<string[]> {
  const problems: string[] = [];
  const on = `on ${node.id}`;
  const estate = await getJson(node.app, "/estate");
  const retention = (estate.body.retention ?? {}) as Record<string, { hold: unknown }>;
  const agents = ((await getJson(node.app, "/agents")).body.agents ?? []) as { handle: string; paused: unknown }[];
  let stream: Map<string, Notification> | null = null;
  for (const rb of latest) {
    switch (rb.kind) {
      case "revision": {
        if (rb.company === null) {
          problems.push(`revision ${rb.digest} was stored though the company schema refuses it`);
          break;
        }
        const got = await getJson(node.app, `/config/revisions/${rb.digest}`);
        if (got.status !== 200) problems.push(`revision ${rb.digest} reads ${got.status} ${on}`);
        else if (canonicalJson(got.body.company) !== rb.company) problems.push(`revision ${rb.digest} reads back different ${on}`);
        else if (companyDigest(companySchema.parse(got.body.company)) !== rb.digest) problems.push(`revision ${rb.digest}'s company digests to something else ${on}`);
        break;
      }
      case "active": {
        if (rb.digest !== rb.asked) problems.push(`activating ${rb.asked} answered ${rb.digest}`);
        const got = await getJson(node.app, "/config/revisions");
        const active = (got.body.active as { digest?: unknown } | null)?.digest;
        if (active !== rb.digest) problems.push(`the active revision is ${String(active)} ${on}, the last config write left ${rb.digest}`);
        break;
      }
      case "hold":
        if (!same(retention[rb.domain]?.hold ?? null, rb.hold)) problems.push(`${rb.domain}'s hold reads ${JSON.stringify(retention[rb.domain]?.hold ?? null)} ${on}, the last write left ${JSON.stringify(rb.hold)}`);
        break;
      case "paused": {
        const a = agents.find((x) => x.handle === rb.handle);
        if (!a) problems.push(`${rb.handle} is not in GET /agents ${on}`);
        else if (!same(a.paused, rb.paused)) problems.push(`${rb.handle} reads paused ${JSON.stringify(a.paused)} ${on}, the last write left ${JSON.stringify(rb.paused)}`);
        break;
      }
      case "stop": {
        const e = await node.coord.slot("controls").get(`stop.${rb.handle}`);
        const id = e && e.operation === "put" ? (JSON.parse(new TextDecoder().decode(e.value)) as { id?: unknown }).id : null;
        if (id !== rb.id) problems.push(`${rb.handle}'s last stop reads ${String(id)} ${on}, not ${rb.id}`);
        break;
      }
      case "notification": {
        stream ??= await notifications(node.jsm);
        const n = stream.get(rb.delivery);
        if (!n) problems.push(`delivery ${rb.delivery} is not on ${STREAM_NOTIFICATIONS} (read ${on})`);
        else if (rb.body !== null && n.event.body !== rb.body) problems.push(`delivery ${rb.delivery}'s event body reads back different (${n.event.body.length} vs ${rb.body.length} chars)`);
        else if (rb.seats !== null && !same(n.seats, rb.seats)) problems.push(`delivery ${rb.delivery} wakes ${n.seats.join(",")}, the answer said ${rb.seats.join(",")}`);
        break;
      }
      default:
        break;
    }
  }
  return problems;
}

/**
 * After the writes: every domain in service on every node, the copies level and alike,
 * every 2xx write readable as written on every node (the last write to a thing wins, so
 * a work item's body is checked only when no later write changed it — `latest` below),
 * and no drain reached a node.
 */
export async function checkAfter(o: { nodes: FuzzNode[]; readbacks: Readback[]; report: FuzzReport; level: () => Promise<number[]> }): Promise<void> {
  const ends = await o.level();
  for (const n of o.nodes) {
    const e = n.estate;
    await e.copy!.check();
    const h = e.health();
    for (const d of DOMAINS) {
      if (!h.domains![d].in_service) o.report.failures.push(`${n.id}'s ${d} copy is out of service: ${h.domains![d].reason}`);
      if (e.copy!.applied(d) !== ends[DOMAINS.indexOf(d)]) o.report.failures.push(`${n.id}'s ${d} copy is at ${e.copy!.applied(d)}, the log at ${ends[DOMAINS.indexOf(d)]}`);
    }
    if (n.drains > 0) o.report.failures.push(`${n.id} was asked to drain ${n.drains} time(s)`);
  }
  const digests = o.nodes.map((n) => JSON.stringify(digestTables(n.estate.copy!.sqlite)));
  if (new Set(digests).size !== 1) o.report.failures.push("the copies' digests differ");
  // The last expectation per thing wins (later writes overwrite); a duplicate delivery's
  // presence check does not replace the accepted one's body check.
  const latest = new Map<string, Readback>();
  for (const rb of o.readbacks) {
    const k = readbackKey(rb);
    if (rb.kind === "notification" && latest.has(k)) continue;
    latest.set(k, rb);
  }
  const fleet: Readback[] = [];
  for (const n of o.nodes) {
    const router = n.estate.router;
    for (const rb of latest.values()) {
      o.report.readbacks += 1;
      if (rb.kind === "work") {
        const got = await router.read({ q: "work.get", key: rb.key });
        if (!got) o.report.failures.push(`work ${rb.key} is not readable on ${n.id}`);
        else if (rb.body !== undefined && got.item.body !== rb.body) o.report.failures.push(`work ${rb.key} body reads back different on ${n.id} (${got.item.body.length} vs ${rb.body.length} chars)`);
      } else if (rb.kind === "comment") {
        const got = await router.read({ q: "work.get", key: rb.key });
        const c = got?.comments.find((x) => x.id === rb.id);
        if (!c || c.body !== rb.body) o.report.failures.push(`comment ${rb.id} on ${rb.key} does not read back as written on ${n.id}`);
      } else if (rb.kind === "page") {
        const got = await router.read({ q: "pages.get", container: rb.container, title: rb.title });
        if (!got || got.body !== rb.body) o.report.failures.push(`page ${rb.container}/${rb.title} does not read back as written on ${n.id}`);
      } else if (rb.kind === "message") {
        const got = await router.read({ q: "chat.message", id: rb.id });
        if (!got || got.body !== rb.body) o.report.failures.push(`message ${rb.id} does not read back as written on ${n.id}`);
      } else if (n === o.nodes[0]) fleet.push(rb);
    }
    o.report.failures.push(...(await settled(() => fleetReadbacks(n, fleet))));
  }
}

/** The figures a run prints: requests, statuses per route, readbacks, failures. */
export function reportLines(report: FuzzReport, readbacks: Readback[]): string[] {
  const twoXX = Object.entries(report.statuses).reduce((s, [k, v]) => s + (Number(k) < 300 ? v : 0), 0);
  const kinds: Record<string, number> = {};
  for (const rb of readbacks) kinds[rb.kind] = (kinds[rb.kind] ?? 0) + 1;
  return [
    `  requests sent            ${report.sent} in ${Math.round(report.wall_ms)} ms (${(report.sent / (report.wall_ms / 1000)).toFixed(0)}/s, one at a time)`,
    `  statuses                 ${JSON.stringify(report.statuses)}`,
    ...Object.entries(report.byRoute)
      .sort()
      .map(([route, s]) => `    ${route.padEnd(40)} ${JSON.stringify(s)}`),
    `  2xx writes               ${twoXX}; expectations ${JSON.stringify(kinds)}; ${report.readbacks} reads across the nodes`,
    `  domains in service       ${report.failures.some((f) => f.includes("out of service")) ? "NO" : "all, on every node"}`,
    `  failures                 ${report.failures.length}`,
    ...report.failures.slice(0, 20).map((f) => `    ${f}`),
  ];
}
