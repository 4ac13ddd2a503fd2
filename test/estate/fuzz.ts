// The write-route fuzzer (issue 12, "Done when"): generated bodies across every write
// route — sizes at and around every limit (in bytes, in 1- to 4-byte characters), unicode
// (combining marks, RTL, NUL and control characters, lone surrogates, escapes that double
// in JSON), wrong types, missing and stray fields, bad path parameters — sent to the nodes'
// APIs in turn. Afterwards every domain must be in service on every node, the copies'
// digests must agree, and every 2xx write must read back as written. Shared by the CI test
// on R1 (test/estate/fuzz.test.ts) and the bench on R3 (bench/estate-fuzz.ts).
import type { Hono } from "hono";
import { companySchema, type Company } from "../../src/config/company.ts";
import type { AuthEnv } from "../../src/api/auth.ts";
import { digestTables } from "../../src/estate/digest.ts";
import type { Estate } from "../../src/estate/estate.ts";
import {
  MAX_ACTOR_BYTES,
  MAX_LABEL_BYTES,
  MAX_LABELS,
  MAX_MESSAGE_BYTES,
  MAX_PAGE_BODY_BYTES,
  MAX_TITLE_BYTES,
  MAX_WORK_BODY_BYTES,
  MAX_REASON_BYTES,
} from "../../src/estate/records.ts";
import { DOMAINS } from "../../src/estate/schema.ts";

export const FUZZ_TOKEN = "fuzz-token-0123456789abcdefghij";
/** Seats enough for a DM one member past the limit (16). */
export const FUZZ_HANDLES = Array.from({ length: 18 }, (_, i) => `s${String(i).padStart(2, "0")}`);

export function fuzzCompany(): Company {
  return companySchema.parse({
    name: "Fuzz",
    roles: [...FUZZ_HANDLES.map((h) => ({ name: h, handle: h, kind: "agent" })), { name: "Pat", handle: "pat", kind: "human" }],
    units: [{ name: "Engineering", id: "eng", project: "ENG", space: "eng-docs", channel: "eng", roles: [...FUZZ_HANDLES, "pat"] }],
  });
}

/** A small seeded PRNG (mulberry32): a failing run is reproduced by its seed. */
export function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n: number) => Math.floor(next() * n),
    pick: <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!,
    chance: (p: number) => next() < p,
  };
}
type Rng = ReturnType<typeof prng>;

/** Units of text by their UTF-8 size, and a few that JSON or storage treat specially. */
const UNITS = ["a", "é", "€", "😀", "a", '"'] as const;
const ODD = ["\u0000", "\u0007", "\n", '"', "\\", "\u202e", "e\u0301", "\ud800", "\udc00", "\u2028", "<script>", "' OR 1=1 --", "%00", "\t"];

/** Text of about `bytes` UTF-8 bytes made of one unit (so a limit is hit exactly, or just past). */
function textOfBytes(rng: Rng, bytes: number): string {
  const unit = rng.pick(UNITS);
  const n = Math.max(0, Math.floor(bytes / Buffer.byteLength(unit)));
  let s = unit.repeat(n);
  // Pad with ASCII to the exact byte count.
  s += "a".repeat(Math.max(0, bytes - Buffer.byteLength(s)));
  return s;
}

/** A string for a field whose limit is `limit` bytes: mostly ordinary, often at or around the limit, sometimes odd. */
function fieldText(rng: Rng, limit: number): string {
  const r = rng.next();
  if (r < 0.6) return `t${rng.int(1_000_000)} ${rng.pick(["plain", "naïve café", "日本語", "ελληνικά", "emoji 🎉", "mixed \u202e rtl"])}`;
  if (r < 0.82) return textOfBytes(rng, limit + rng.pick([-1, 0, 0, 1, 2, -4, 3]));
  if (r < 0.95) return Array.from({ length: 1 + rng.int(6) }, () => rng.pick(ODD)).join(rng.pick(["", "x", " "]));
  return rng.pick(["", " ", "   "]);
}

/** A value of the wrong type, for any field. */
function wrongType(rng: Rng): unknown {
  return rng.pick([42, -1, 1.5, true, false, null, [], ["a"], {}, { nested: "x" }, "", 1e308]);
}

function maybeWrong<T>(rng: Rng, good: () => T, p = 0.06): unknown {
  return rng.chance(p) ? wrongType(rng) : good();
}

function labelList(rng: Rng): unknown {
  const n = rng.pick([0, 1, 3, MAX_LABELS, MAX_LABELS + 1]);
  return Array.from({ length: n }, () => (rng.chance(0.3) ? textOfBytes(rng, MAX_LABEL_BYTES + rng.pick([-1, 0, 1])) : `l${rng.int(50)}`));
}

function dueValue(rng: Rng): unknown {
  return rng.pick(["2026-12-31", "2026-02-30", "next friday", "2026-1-1", null, "2024-02-29", "9999-12-31", "0000-00-00"]);
}

export interface FuzzRequest {
  route: string;
  method: string;
  path: string;
  /** JSON text, or a raw (non-JSON) body. */
  body: string | undefined;
  contentType: string;
  /** Attached to a 2xx answer: how to read the write back. */
  expect?: (answer: Record<string, unknown>) => Readback | null;
}

export type Readback =
  | { kind: "work"; key: string; title?: string; body?: string }
  | { kind: "comment"; key: string; id: string; body: string }
  | { kind: "page"; container: string; title: string; body: string }
  | { kind: "message"; id: string; body: string };

/** A path segment; a lone surrogate (which no URL can carry) becomes invalid UTF-8 bytes, %ED%A0%80. */
function enc(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    return s
      .split(/([\ud800-\udfff])/)
      .map((part) => (/^[\ud800-\udfff]$/.test(part) ? "%ED%A0%80" : encodeURIComponent(part)))
      .join("");
  }
}

function workKeyParam(rng: Rng, created: string[]): string {
  if (created.length > 0 && rng.chance(0.8)) return rng.pick(created);
  return rng.pick(["ENG-999999", "eng-1", "ENG-0", "X", "ENG-1%2F2", "ENG-" + "9".repeat(20)]);
}

/** One generated request for a route chosen at random. */
export function generate(rng: Rng, created: string[]): FuzzRequest {
  const route = rng.pick(["work.create", "work.create", "work.patch", "work.comment", "work.comment", "page.put", "page.put", "chat.post", "chat.post", "chat.post", "chat.dm", "estate.skip", "deadletter"]);
  const json = (v: unknown) => JSON.stringify(v);
  const rawBody = rng.chance(0.02);
  const contentType = rng.chance(0.02) ? "text/plain" : "application/json";
  const wrap = (r: Omit<FuzzRequest, "contentType">): FuzzRequest => ({ ...r, contentType, ...(rawBody ? { body: rng.pick(["{", "[1,2", "null", '"str"', "{}", "\u0000"]) } : {}) });
  switch (route) {
    case "work.create": {
      const title = maybeWrong(rng, () => fieldText(rng, MAX_TITLE_BYTES));
      const body = maybeWrong(rng, () => fieldText(rng, MAX_WORK_BODY_BYTES), 0.05);
      const b: Record<string, unknown> = { title, project: maybeWrong(rng, () => rng.pick(["ENG", "ENG", "ENG", "GEN", "eng", "ZZZ"])) };
      if (rng.chance(0.7)) b.body = body;
      if (rng.chance(0.2)) b.labels = labelList(rng);
      if (rng.chance(0.2)) b.due = dueValue(rng);
      if (rng.chance(0.2)) b.assignee = maybeWrong(rng, () => rng.pick([...FUZZ_HANDLES.slice(0, 3), "nobody", textOfBytes(rng, MAX_ACTOR_BYTES + rng.pick([0, 1]))]));
      if (rng.chance(0.1)) b.priority = rng.pick(["high", "urgent!", 3]);
      if (rng.chance(0.05)) b.surprise = 1;
      return wrap({
        route,
        method: "POST",
        path: "/work",
        body: json(b),
        expect: (a) => (typeof a.key === "string" ? { kind: "work", key: a.key, ...(typeof title === "string" ? { title: title.trim() } : {}), ...(typeof b.body === "string" ? { body: b.body as string } : {}) } : null),
      });
    }
    case "work.patch": {
      const patch: Record<string, unknown> = {};
      const fields = ["status", "title", "body", "assignee", "labels", "due", "priority"];
      for (const f of fields) if (rng.chance(0.2)) patch[f] = f === "title" ? maybeWrong(rng, () => fieldText(rng, MAX_TITLE_BYTES)) : f === "body" ? fieldText(rng, MAX_WORK_BODY_BYTES) : f === "labels" ? labelList(rng) : f === "due" ? dueValue(rng) : f === "status" ? rng.pick(["todo", "done", "finished", null]) : f === "assignee" ? rng.pick(["s01", null, "", 7]) : rng.pick(["low", "none", "meh"]);
      const key = workKeyParam(rng, created);
      return wrap({ route, method: "PATCH", path: `/work/${key}`, body: json(patch), expect: () => (typeof patch.body === "string" ? { kind: "work", key, body: patch.body } : null) });
    }
    case "work.comment": {
      const key = workKeyParam(rng, created);
      const body = maybeWrong(rng, () => fieldText(rng, MAX_WORK_BODY_BYTES));
      const b: Record<string, unknown> = { body };
      if (rng.chance(0.2)) b.author = maybeWrong(rng, () => textOfBytes(rng, MAX_ACTOR_BYTES + rng.pick([0, 1])));
      return wrap({ route, method: "POST", path: `/work/${key}/comments`, body: json(b), expect: (a) => (typeof a.comment_id === "string" && typeof body === "string" ? { kind: "comment", key, id: a.comment_id, body } : null) });
    }
    case "page.put": {
      const container = rng.pick(["eng-docs", "eng-docs", "company", "nope", "a%2Fb", "%20lead"]);
      const title = rng.chance(0.7) ? `Page ${rng.int(40)}` : fieldText(rng, MAX_TITLE_BYTES).slice(0, 2000);
      const body = maybeWrong(rng, () => fieldText(rng, MAX_PAGE_BODY_BYTES));
      const b: Record<string, unknown> = { body };
      if (rng.chance(0.3)) b.labels = labelList(rng);
      if (rng.chance(0.2)) b.base_revision = rng.pick([0, 1, -1, null, "1", 1e20]);
      return wrap({
        route,
        method: "PUT",
        path: `/pages/${container}/${enc(title)}`,
        body: json(b),
        expect: (a) => (typeof a.revision === "number" && typeof body === "string" ? { kind: "page", container: a.container as string, title: a.title as string, body } : null),
      });
    }
    case "chat.post":
    case "chat.dm": {
      const channel =
        route === "chat.dm"
          ? "dm." + [...FUZZ_HANDLES.slice(0, rng.pick([2, 3, 16, 17, 18]))].sort().join(".")
          : rng.pick(["general", "eng", "eng", "nope", "UPPER", "dm.s00", "a".repeat(201)]);
      const body = maybeWrong(rng, () => (rng.chance(0.1) ? FUZZ_HANDLES.map((h) => `@${h}`).join(" ") + " " + "@x".repeat(40) : fieldText(rng, MAX_MESSAGE_BYTES)));
      const b: Record<string, unknown> = { body };
      if (rng.chance(0.15)) b.thread_parent = rng.pick(["nope-nope-nope", 5, null]);
      return wrap({ route, method: "POST", path: `/chat/channels/${channel}/messages`, body: json(b), expect: (a) => (typeof a.message_id === "string" && typeof body === "string" ? { kind: "message", id: a.message_id, body } : null) });
    }
    case "estate.skip": {
      const b = { position: maybeWrong(rng, () => rng.pick([1, 2, 999_999])), reason: maybeWrong(rng, () => fieldText(rng, MAX_REASON_BYTES)) };
      return wrap({ route, method: "POST", path: `/estate/${rng.pick(["chat", "tracker", "pages", "nope"])}/skip`, body: json(b) });
    }
    default: {
      const id = rng.pick(["1", "0", "-3", "abc", "99999999999999999999"]);
      return wrap(rng.chance(0.5) ? { route, method: "POST", path: `/deadletters/${id}/replay`, body: undefined } : { route, method: "DELETE", path: `/deadletters/${id}`, body: undefined });
    }
  }
}

/** Statuses a write route may answer a client's input with; anything else is a failure. */
export const ALLOWED_STATUSES = new Set([200, 202, 400, 404, 409, 413, 415, 422]);

export interface FuzzReport {
  sent: number;
  statuses: Record<string, number>;
  byRoute: Record<string, Record<string, number>>;
  failures: string[];
  readbacks: number;
  wall_ms: number;
}

type App = Hono<AuthEnv>;

/** Sends `count` generated requests round-robin to `apps`; collects what must read back. */
export async function fuzzWrites(o: { apps: App[]; count: number; seed: number }): Promise<{ report: FuzzReport; readbacks: Readback[] }> {
  const rng = prng(o.seed);
  const created: string[] = [];
  const readbacks: Readback[] = [];
  const report: FuzzReport = { sent: 0, statuses: {}, byRoute: {}, failures: [], readbacks: 0, wall_ms: 0 };
  const started = performance.now();
  for (let i = 0; i < o.count; i++) {
    const req = generate(rng, created);
    const app = o.apps[i % o.apps.length]!;
    const headers: Record<string, string> = { authorization: `Bearer ${FUZZ_TOKEN}` };
    if (req.body !== undefined) headers["content-type"] = req.contentType;
    let res: Response;
    try {
      res = await app.request(req.path, { method: req.method, headers, body: req.body });
    } catch (err) {
      report.failures.push(`#${i} ${req.method} ${req.path}: threw ${(err as Error).message}`);
      continue;
    }
    report.sent += 1;
    report.statuses[res.status] = (report.statuses[res.status] ?? 0) + 1;
    const r = (report.byRoute[req.route] ??= {});
    r[res.status] = (r[res.status] ?? 0) + 1;
    const text = await res.text();
    if (!ALLOWED_STATUSES.has(res.status)) {
      report.failures.push(`#${i} ${req.method} ${req.path.slice(0, 120)} → ${res.status}: ${text.slice(0, 300)}`);
      continue;
    }
    if (res.status >= 400) {
      // A refusal names what is wrong, in the one error shape.
      const err = (JSON.parse(text) as { error?: { code?: unknown; message?: unknown } }).error;
      if (typeof err?.code !== "string" || typeof err.message !== "string") report.failures.push(`#${i} ${req.path.slice(0, 120)} → ${res.status} without an error body: ${text.slice(0, 200)}`);
      continue;
    }
    const answer = JSON.parse(text) as Record<string, unknown>;
    if (req.route === "work.create" && typeof answer.key === "string") created.push(answer.key);
    const rb = req.expect?.(answer);
    if (rb) readbacks.push(rb);
  }
  report.wall_ms = performance.now() - started;
  return { report, readbacks };
}

/**
 * After the writes: every domain in service on every node, the copies level and alike,
 * and every 2xx write readable as written (the last write to a field wins, so a work
 * item's body is checked only when no later write changed it — `latest` below).
 */
export async function checkAfter(o: { estates: Estate[]; readbacks: Readback[]; report: FuzzReport; level: () => Promise<number[]> }): Promise<void> {
  const ends = await o.level();
  for (const e of o.estates) {
    await e.copy!.check();
    const h = e.health();
    for (const d of DOMAINS) {
      if (!h.domains![d].in_service) o.report.failures.push(`a copy's ${d} is out of service: ${h.domains![d].reason}`);
      if (e.copy!.applied(d) !== ends[DOMAINS.indexOf(d)]) o.report.failures.push(`a copy's ${d} is at ${e.copy!.applied(d)}, the log at ${ends[DOMAINS.indexOf(d)]}`);
    }
  }
  const digests = o.estates.map((e) => JSON.stringify(digestTables(e.copy!.sqlite)));
  if (new Set(digests).size !== 1) o.report.failures.push("the copies' digests differ");
  // The last expectation per work item body / page wins (later writes overwrite).
  const latest = new Map<string, Readback>();
  for (const rb of o.readbacks) {
    const k = rb.kind === "work" ? `work:${rb.key}` : rb.kind === "page" ? `page:${rb.container}/${rb.title}` : `${rb.kind}:${rb.id}`;
    latest.set(k, rb);
  }
  for (const e of o.estates) {
    const router = e.router;
    for (const rb of latest.values()) {
      o.report.readbacks += 1;
      if (rb.kind === "work") {
        const got = await router.read({ q: "work.get", key: rb.key });
        if (!got) o.report.failures.push(`work ${rb.key} is not readable`);
        else if (rb.body !== undefined && got.item.body !== rb.body) o.report.failures.push(`work ${rb.key} body reads back different (${got.item.body.length} vs ${rb.body.length} chars)`);
      } else if (rb.kind === "comment") {
        const got = await router.read({ q: "work.get", key: rb.key });
        const c = got?.comments.find((x) => x.id === rb.id);
        if (!c || c.body !== rb.body) o.report.failures.push(`comment ${rb.id} on ${rb.key} does not read back as written`);
      } else if (rb.kind === "page") {
        const got = await router.read({ q: "pages.get", container: rb.container, title: rb.title });
        if (!got || got.body !== rb.body) o.report.failures.push(`page ${rb.container}/${rb.title} does not read back as written`);
      } else {
        const got = await router.read({ q: "chat.message", id: rb.id });
        if (!got || got.body !== rb.body) o.report.failures.push(`message ${rb.id} does not read back as written`);
      }
    }
  }
}
