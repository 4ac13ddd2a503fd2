// The write-route fuzzer (issue 12, "Done when"): generated bodies across every write
// route — sizes at and around every limit (in bytes, in 1- to 4-byte characters), unicode
// (combining marks, RTL, NUL and control characters, lone surrogates, escapes that double
// in JSON), wrong types, missing and stray fields, bad path parameters, signed and unsigned
// webhooks — sent to the nodes' APIs in turn. Afterwards every domain must be in service on
// every node, the copies' digests must agree, and every 2xx write must read back as written
// on every node (the estate's records, company revisions through GET /config/revisions,
// holds through GET /estate, pauses through GET /agents, stops in crewlet_controls, webhook
// deliveries on the notifications stream). The nodes are test/estate/fuzz-node.ts, the
// check test/estate/fuzz-check.ts; the CI test on R1 is test/estate/fuzz.test.ts, the bench
// on R3 bench/estate-fuzz.ts.
//
// Which routes: GENERATORS is keyed by the app's own route table ("POST /work/:key/comments"),
// and `coverage` fails a run when a write route in the table has no generator, a generator
// names no route, or a write route declared anywhere in src/ is not mounted by
// startFuzzNode — so a route added later is fuzzed or the test says why not.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Hono } from "hono";
import { routeTable } from "../../src/api/app.ts";
import type { AuthEnv } from "../../src/api/auth.ts";
import { MAX_BODY_BYTES } from "../../src/api/errors.ts";
import { companySchema, type Company } from "../../src/config/company.ts";
import {
  MAX_ACTOR_BYTES,
  MAX_LABEL_BYTES,
  MAX_LABELS,
  MAX_MESSAGE_BYTES,
  MAX_PAGE_BODY_BYTES,
  MAX_TITLE_BYTES,
  MAX_WORK_BODY_BYTES,
  MAX_REASON_BYTES,
  MAX_FILE_NAME_BYTES,
} from "../../src/estate/records.ts";
import { DOMAINS } from "../../src/estate/schema.ts";
import { cutBytes, MAX_EVENT_BODY_BYTES } from "../../src/integrations/event.ts";
import { MAX_WEBHOOK_BODY_BYTES } from "../../src/integrations/index.ts";
import { signGeneric } from "../../src/integrations/signature.ts";
import { canonicalJson, companyDigest } from "../../src/config/company-revisions.ts";

export const FUZZ_TOKEN = "fuzz-token-0123456789abcdefghij";
/** Seats enough for a DM one member past the limit (16). */
export const FUZZ_HANDLES = Array.from({ length: 18 }, (_, i) => `s${String(i).padStart(2, "0")}`);
/** The fuzz company's generic webhook: its HMAC key and the seat it wakes. */
export const FUZZ_HOOK = { id: "hook", secret: "fuzz-hook-secret-0123456789abcdef", seat: "s00" } as const;

/** The company as written in a file (before defaults): the revisions fuzzer varies it. */
function fuzzCompanyInput(): Record<string, unknown> {
  return {
    name: "Fuzz",
    roles: [...FUZZ_HANDLES.map((h) => ({ name: h, handle: h, kind: "agent" })), { name: "Pat", handle: "pat", kind: "human" }],
    units: [{ name: "Engineering", id: "eng", project: "ENG", space: "eng-docs", channel: "eng", roles: [...FUZZ_HANDLES, "pat"] }],
    integrations: [{ id: FUZZ_HOOK.id, kind: "generic", secret: FUZZ_HOOK.secret, routes: [{ seat: FUZZ_HOOK.seat }] }],
  };
}

export function fuzzCompany(): Company {
  return companySchema.parse(fuzzCompanyInput());
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
/** Units JSON does not escape: their UTF-8 size is their size in a JSON body. */
const JSON_PLAIN_UNITS = ["a", "é", "€", "😀"] as const;
const ODD = ["\u0000", "\u0007", "\n", '"', "\\", "\u202e", "e\u0301", "\ud800", "\udc00", "\u2028", "<script>", "' OR 1=1 --", "%00", "\t"];

/** Text of about `bytes` UTF-8 bytes made of one unit (so a limit is hit exactly, or just past). */
function textOfBytes(rng: Rng, bytes: number, units: readonly string[] = UNITS): string {
  const unit = rng.pick(units);
  const n = Math.max(0, Math.floor(bytes / Buffer.byteLength(unit)));
  let s = unit.repeat(n);
  // Pad with ASCII to the exact byte count.
  s += "a".repeat(Math.max(0, bytes - Buffer.byteLength(s)));
  return s;
}

/** Text of exactly `n` UTF-16 code units (what zod's string max counts), of one unit. */
function textOfChars(rng: Rng, n: number): string {
  const unit = rng.pick(["a", "é", "😀", "e\u0301"]);
  const s = unit.repeat(Math.floor(n / unit.length));
  return s + "a".repeat(Math.max(0, n - s.length));
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

/** `value` as JSON whose `set(value, pad)` field is padded so the whole text is `bytes` long. */
function jsonOfBytes(rng: Rng, bytes: number, build: (pad: string) => unknown): string {
  const base = Buffer.byteLength(JSON.stringify(build("")));
  return JSON.stringify(build(textOfBytes(rng, Math.max(0, bytes - base), JSON_PLAIN_UNITS)));
}

export type Readback =
  | { kind: "work"; key: string; title?: string; body?: string }
  | { kind: "comment"; key: string; id: string; body: string }
  | { kind: "page"; container: string; title: string; body: string }
  | { kind: "message"; id: string; body: string }
  /** A stored company revision; `company` is the canonical JSON of what was posted, parsed (null: the schema refuses it, so a 2xx was wrong). */
  | { kind: "revision"; digest: string; company: string | null }
  /** The revision a config write left active (the last one wins); `asked` is what was named. */
  | { kind: "active"; digest: string; asked: string }
  /** The hold in force on a domain's log after a hold or release (null: none). */
  | { kind: "hold"; domain: string; hold: unknown }
  /** A seat's pause as GET /agents shows it after a pause or resume (null: not paused). */
  | { kind: "paused"; handle: string; paused: unknown }
  /** The last stop requested for a seat, by its id. */
  | { kind: "stop"; handle: string; id: string }
  /** An accepted webhook delivery on the notifications stream; `body` is the event text as cut (null: a duplicate, only its presence is known). */
  | { kind: "notification"; delivery: string; body: string | null; seats: string[] | null };

export interface FuzzRequest {
  /** The route table's key: "POST /work/:key/comments". */
  route: string;
  method: string;
  path: string;
  /** JSON text, or a raw (non-JSON) body. */
  body: string | undefined;
  contentType: string;
  /** Further headers (a webhook's signature). */
  headers?: Record<string, string>;
  /** Attached to a 2xx answer: what must read back afterwards. */
  expect?: (answer: Record<string, unknown>) => Readback[];
}

/** What earlier 2xx answers made: later requests aim at it (patch a created item, activate a stored revision, resend a delivery). */
export interface FuzzContext {
  created: string[];
  /** Chat messages posted (their ids), for the routes on a message. */
  messages: string[];
  digests: string[];
  hookBodies: string[];
}

interface Generator {
  /** Relative share of the requests. */
  weight: number;
  make: (rng: Rng, ctx: FuzzContext) => FuzzRequest;
  /** Statuses this route may answer beyond ALLOWED_STATUSES (a webhook's bad signature is 401). */
  allowed?: readonly number[];
}

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

function seatParam(rng: Rng): string {
  return rng.chance(0.85) ? rng.pick(FUZZ_HANDLES) : rng.pick(["pat", "nope", "S00", "%00", "s00%2F..", "a".repeat(300)]);
}

/** A body for a route that takes none: nothing or {} (both accepted), or something it must refuse. */
function noBody(rng: Rng): { body: string | undefined; contentType?: string } {
  const r = rng.next();
  if (r < 0.4) return { body: undefined };
  if (r < 0.75) return { body: "{}" };
  return rng.pick([{ body: '{"x":1}' }, { body: "[]" }, { body: "null" }, { body: "{" }, { body: "{}", contentType: "text/plain" }, { body: `{"pad":"${"x".repeat(MAX_BODY_BYTES)}"}` }]);
}

const json = (v: unknown) => JSON.stringify(v);

/** A variant of the fuzz company, mostly valid: other names, missions, goals, seats, zones. */
function companyVariant(rng: Rng): Record<string, unknown> {
  const c = fuzzCompanyInput();
  c.name = rng.chance(0.8) ? `Fuzz ${rng.pick(["Co", "naïve café", "日本語", "🎉", "\u202e rtl"])} ${rng.int(1000)}` : fieldText(rng, 256) || "x";
  if (rng.chance(0.6)) c.mission = fieldText(rng, 4096);
  if (rng.chance(0.3)) c.policies = Array.from({ length: rng.int(5) }, () => fieldText(rng, 512));
  if (rng.chance(0.2)) c.timezone = rng.pick(["UTC", "Europe/Paris", "Asia/Kolkata", "America/St_Johns"]);
  const roles = c.roles as Record<string, unknown>[];
  for (const r of roles) if (rng.chance(0.1)) r.goal = fieldText(rng, 2048);
  if (rng.chance(0.2)) roles.push({ name: `Extra ${rng.int(1000)}`, handle: `x${rng.int(1000)}`, goal: "more hands" });
  return c;
}

/** A company the schema refuses, each naming one rule. */
function badCompany(rng: Rng): unknown {
  const c = companyVariant(rng);
  const roles = c.roles as Record<string, unknown>[];
  switch (rng.int(11)) {
    case 0:
      return { ...c, name: wrongType(rng) };
    case 1:
      return { ...c, name: "" };
    case 2:
      return { ...c, roles: [...roles, { ...roles[0] }] }; // a duplicate handle
    case 3:
      return { ...c, default_llm: "nope" };
    case 4:
      return { ...c, timezone: "Mars/Olympus_Mons" };
    case 5:
      return { ...c, surprise: 1 };
    case 6:
      return { ...c, roles: [{ ...roles[0], manages: ["s01"] }, { ...roles[1], manages: ["s00"] }, ...roles.slice(2)] }; // a cycle
    case 7:
      return { ...c, integrations: [{ id: "short", kind: "generic", secret: "short", routes: [] }] };
    case 8:
      return { ...c, integrations: [{ id: "h", kind: "generic", secret: FUZZ_HOOK.secret, routes: [{ seat: "pat" }] }] }; // a route to a person
    case 9:
      return { ...c, units: [{ name: "U", project: "eng" }] };
    default:
      return { ...c, roles: [{ name: "☃☃", kind: "agent" }] }; // no handle derivable
  }
}

/** The canonical JSON of what a valid company parses to, or null when the schema refuses it. */
function parsedCanonical(raw: unknown): string | null {
  const p = companySchema.safeParse(raw);
  return p.success ? canonicalJson(p.data) : null;
}

const revisionReadbacks = (expected: string | null, asked: string | null) => (a: Record<string, unknown>): Readback[] =>
  typeof a.digest === "string" ? [...(asked === null ? [{ kind: "revision" as const, digest: a.digest, company: expected }] : []), { kind: "active", digest: a.digest, asked: asked ?? a.digest }] : [];

/** Bodies a webhook sender might post: a generic payload, mostly usable, around the event and body limits. */
function hookPayload(rng: Rng): string {
  if (rng.chance(0.12)) {
    // Around the ingress's body cap, in a payload that is otherwise usable.
    return jsonOfBytes(rng, MAX_WEBHOOK_BODY_BYTES + rng.pick([-1, 0, 1, -4096, 64]), (pad) => ({ text: `big ${rng.int(1e6)} ${pad}` }));
  }
  const r = rng.next();
  if (r < 0.08) return json(wrongType(rng));
  if (r < 0.14) return json(rng.pick([{}, { text: "" }, { text: 42 }, { title: "no text" }]));
  const p: Record<string, unknown> = {
    text: maybeWrong(rng, () => (rng.chance(0.3) ? textOfBytes(rng, MAX_EVENT_BODY_BYTES + rng.pick([-1, 0, 1, 100])) : `${fieldText(rng, 256)} ${rng.int(1e9)}`)),
  };
  if (rng.chance(0.3)) p.event = rng.pick(["notification", "alert.fired", "Bad Event", "a.b.c", 5]);
  if (rng.chance(0.3)) p.title = fieldText(rng, 256);
  if (rng.chance(0.2)) p.url = rng.pick(["https://example.test/a", "not a url", "javascript:alert(1)", "https://e.test/" + "a".repeat(3000)]);
  if (rng.chance(0.2)) p.sender = rng.pick(["ci", "", "😀".repeat(300), 7]);
  if (rng.chance(0.2)) p.thread = rng.pick(["t-1", "", "x".repeat(200), "x".repeat(201)]);
  if (rng.chance(0.1)) p.text = `${p.text} ${FUZZ_HANDLES.map((h) => `@${h}`).join(" ")}`;
  if (rng.chance(0.05)) p.surprise = { nested: [1, 2] };
  return json(p);
}

/** What an accepted generic webhook's event body is: the text, cut to the event limit. */
function hookText(body: string): string | null {
  try {
    const t = (JSON.parse(body) as { text?: unknown }).text;
    return typeof t === "string" ? cutBytes(t, MAX_EVENT_BODY_BYTES) : null;
  } catch {
    return null;
  }
}

/** Refusal-only: a drain stops the node's seats, so the fuzzer sends only what must be refused. */
function drainRequest(route: string, path: string) {
  return (rng: Rng): FuzzRequest => {
    const bad = rng.pick([
      { body: '{"now":true}', contentType: "application/json", query: "" },
      { body: "[]", contentType: "application/json", query: "" },
      { body: "null", contentType: "application/json", query: "" },
      { body: "{", contentType: "application/json", query: "" },
      { body: "42", contentType: "application/json", query: "" },
      { body: "{}", contentType: "text/plain", query: "" },
      { body: "{}", contentType: "application/json", query: "?force=1" },
      { body: undefined, contentType: "application/json", query: "?now" },
    ]);
    return { route, method: "POST", path: path + bad.query, body: bad.body, contentType: bad.contentType };
  };
}

/** An upload to one owner's files: a name at and past its limit or with a slash or a
 *  control character, or none; a few bytes to a few KiB of any type. The bytes go to the
 *  object store, the row to the owner's log, so the copies' digests judge the rows. */
function upload(route: string, owner: string, rng: Rng): FuzzRequest {
  const name = rng.pick<string | null>(["notes.txt", "diff.patch", "shot.png", textOfBytes(rng, MAX_FILE_NAME_BYTES), textOfBytes(rng, MAX_FILE_NAME_BYTES + 1), "a/b", "tab\there", "", null]);
  const contentType = rng.pick(["text/plain", "image/png", "application/octet-stream", "text/html", "application/json"]);
  const query = name === null ? "" : `?name=${encodeURIComponent(name)}${rng.chance(0.05) ? "&surprise=1" : ""}`;
  return { route, method: "POST", path: `${owner}/files${query}`, body: textOfBytes(rng, rng.int(4096)), contentType };
}

/** One generator per write route, keyed as the app's route table names it. */
export const GENERATORS: Record<string, Generator> = {
  "POST /work/:key/files": { weight: 1, make: (rng, ctx) => upload("POST /work/:key/files", `/work/${workKeyParam(rng, ctx.created)}`, rng) },
  "POST /chat/messages/:id/files": {
    weight: 1,
    make: (rng, ctx) => {
      const id = ctx.messages.length > 0 && rng.chance(0.8) ? rng.pick(ctx.messages) : rng.pick(["m-000000000000", "nope", "%00", "a".repeat(300)]);
      return upload("POST /chat/messages/:id/files", `/chat/messages/${id}`, rng);
    },
  },
  "POST /pages/:container/:title/files": {
    weight: 1,
    make: (rng) => upload("POST /pages/:container/:title/files", `/pages/${rng.pick(["eng-docs", "company", "nope"])}/${encodeURIComponent(`Page ${rng.int(40)}`)}`, rng),
  },
  "POST /work": {
    weight: 2,
    make: (rng) => {
      const title = maybeWrong(rng, () => fieldText(rng, MAX_TITLE_BYTES));
      const body = maybeWrong(rng, () => fieldText(rng, MAX_WORK_BODY_BYTES), 0.05);
      const b: Record<string, unknown> = { title, project: maybeWrong(rng, () => rng.pick(["ENG", "ENG", "ENG", "GEN", "eng", "ZZZ"])) };
      if (rng.chance(0.7)) b.body = body;
      if (rng.chance(0.2)) b.labels = labelList(rng);
      if (rng.chance(0.2)) b.due = dueValue(rng);
      if (rng.chance(0.2)) b.assignee = maybeWrong(rng, () => rng.pick([...FUZZ_HANDLES.slice(0, 3), "nobody", textOfBytes(rng, MAX_ACTOR_BYTES + rng.pick([0, 1]))]));
      if (rng.chance(0.1)) b.priority = rng.pick(["high", "urgent!", 3]);
      if (rng.chance(0.05)) b.surprise = 1;
      return {
        route: "POST /work",
        method: "POST",
        path: "/work",
        body: json(b),
        contentType: "application/json",
        expect: (a) => (typeof a.key === "string" ? [{ kind: "work", key: a.key, ...(typeof title === "string" ? { title: title.trim() } : {}), ...(typeof b.body === "string" ? { body: b.body as string } : {}) }] : []),
      };
    },
  },
  "PATCH /work/:key": {
    weight: 1,
    make: (rng, ctx) => {
      const patch: Record<string, unknown> = {};
      const fields = ["status", "title", "body", "assignee", "labels", "due", "priority"];
      for (const f of fields) if (rng.chance(0.2)) patch[f] = f === "title" ? maybeWrong(rng, () => fieldText(rng, MAX_TITLE_BYTES)) : f === "body" ? fieldText(rng, MAX_WORK_BODY_BYTES) : f === "labels" ? labelList(rng) : f === "due" ? dueValue(rng) : f === "status" ? rng.pick(["todo", "done", "finished", null]) : f === "assignee" ? rng.pick(["s01", null, "", 7]) : rng.pick(["low", "none", "meh"]);
      const key = workKeyParam(rng, ctx.created);
      return { route: "PATCH /work/:key", method: "PATCH", path: `/work/${key}`, body: json(patch), contentType: "application/json", expect: () => (typeof patch.body === "string" ? [{ kind: "work", key, body: patch.body }] : []) };
    },
  },
  "POST /work/:key/comments": {
    weight: 2,
    make: (rng, ctx) => {
      const key = workKeyParam(rng, ctx.created);
      const body = maybeWrong(rng, () => fieldText(rng, MAX_WORK_BODY_BYTES));
      const b: Record<string, unknown> = { body };
      if (rng.chance(0.2)) b.author = maybeWrong(rng, () => textOfBytes(rng, MAX_ACTOR_BYTES + rng.pick([0, 1])));
      return {
        route: "POST /work/:key/comments",
        method: "POST",
        path: `/work/${key}/comments`,
        body: json(b),
        contentType: "application/json",
        expect: (a) => (typeof a.comment_id === "string" && typeof body === "string" ? [{ kind: "comment", key, id: a.comment_id, body }] : []),
      };
    },
  },
  "PUT /pages/:container/:title": {
    weight: 2,
    make: (rng) => {
      const container = rng.pick(["eng-docs", "eng-docs", "company", "nope", "a%2Fb", "%20lead"]);
      const title = rng.chance(0.7) ? `Page ${rng.int(40)}` : fieldText(rng, MAX_TITLE_BYTES).slice(0, 2000);
      const body = maybeWrong(rng, () => fieldText(rng, MAX_PAGE_BODY_BYTES));
      const b: Record<string, unknown> = { body };
      if (rng.chance(0.3)) b.labels = labelList(rng);
      if (rng.chance(0.2)) b.base_revision = rng.pick([0, 1, -1, null, "1", 1e20]);
      return {
        route: "PUT /pages/:container/:title",
        method: "PUT",
        path: `/pages/${container}/${enc(title)}`,
        body: json(b),
        contentType: "application/json",
        expect: (a) => (typeof a.revision === "number" && typeof body === "string" ? [{ kind: "page", container: a.container as string, title: a.title as string, body }] : []),
      };
    },
  },
  "POST /chat/channels/:id/messages": {
    weight: 4,
    make: (rng) => {
      // One in four is a DM, to sizes around the member limit (16).
      const channel = rng.chance(0.25)
        ? "dm." + [...FUZZ_HANDLES.slice(0, rng.pick([2, 3, 16, 17, 18]))].sort().join(".")
        : rng.pick(["general", "eng", "eng", "nope", "UPPER", "dm.s00", "a".repeat(201)]);
      const body = maybeWrong(rng, () => (rng.chance(0.1) ? FUZZ_HANDLES.map((h) => `@${h}`).join(" ") + " " + "@x".repeat(40) : fieldText(rng, MAX_MESSAGE_BYTES)));
      const b: Record<string, unknown> = { body };
      if (rng.chance(0.15)) b.thread_parent = rng.pick(["nope-nope-nope", 5, null]);
      return {
        route: "POST /chat/channels/:id/messages",
        method: "POST",
        path: `/chat/channels/${channel}/messages`,
        body: json(b),
        contentType: "application/json",
        expect: (a) => (typeof a.message_id === "string" && typeof body === "string" ? [{ kind: "message", id: a.message_id, body }] : []),
      };
    },
  },
  "POST /estate/:domain/skip": {
    weight: 1,
    make: (rng) => {
      const b = { position: maybeWrong(rng, () => rng.pick([1, 2, 999_999])), reason: maybeWrong(rng, () => fieldText(rng, MAX_REASON_BYTES)) };
      return { route: "POST /estate/:domain/skip", method: "POST", path: `/estate/${rng.pick(["chat", "tracker", "pages", "nope"])}/skip`, body: json(b), contentType: "application/json" };
    },
  },
  "POST /estate/:domain/hold": {
    weight: 0.6,
    make: (rng) => {
      const domain = rng.pick([...DOMAINS, ...DOMAINS, "nope", "CHAT", "%00"]);
      const r = rng.next();
      // The reason's limit (500) counts UTF-16 code units, not bytes: sizes around it in both.
      const b: unknown =
        r < 0.2
          ? {}
          : r < 0.55
            ? { reason: fieldText(rng, 500) }
            : r < 0.8
              ? { reason: textOfChars(rng, 500 + rng.pick([-1, 0, 1, 2])) }
              : r < 0.9
                ? { reason: wrongType(rng) }
                : { reason: "backup", surprise: 1 };
      return { route: "POST /estate/:domain/hold", method: "POST", path: `/estate/${domain}/hold`, body: json(b), contentType: "application/json", expect: (a) => (a.status === "held" ? [{ kind: "hold", domain, hold: a.hold }] : []) };
    },
  },
  "POST /estate/:domain/release": {
    weight: 0.5,
    make: (rng) => {
      const domain = rng.pick([...DOMAINS, ...DOMAINS, "nope"]);
      const body = rng.pick(["{}", "{}", "{}", '{"reason":"x"}', "[]", undefined]);
      return { route: "POST /estate/:domain/release", method: "POST", path: `/estate/${domain}/release`, body, contentType: "application/json", expect: (a) => (a.status === "released" ? [{ kind: "hold", domain, hold: null }] : []) };
    },
  },
  "POST /runs/:id/cancel": {
    weight: 0.4,
    make: (rng) => {
      // The fuzz node holds one running run (FUZZ_RUN_ID): a cancel of it is 202, then 409-free
      // repeats (a cancel already asked is answered again); any other id is 404 or 400.
      const id = rng.pick([FUZZ_RUN_ID, FUZZ_RUN_ID, "run-no-such-run", "RUN-1", "x", "%00", "r".repeat(80)]);
      const r = rng.next();
      const b = r < 0.3 ? undefined : r < 0.6 ? json({ reason: fieldText(rng, 1024) || "fuzz" }) : r < 0.8 ? json({}) : rng.pick(['{"reason":1}', '{"why":"x"}', "[]", "{"]);
      return { route: "POST /runs/:id/cancel", method: "POST", path: `/runs/${id}/cancel`, body: b, contentType: "application/json" };
    },
  },
  "POST /deadletters/:id/replay": {
    weight: 0.5,
    make: (rng) => ({ route: "POST /deadletters/:id/replay", method: "POST", path: `/deadletters/${rng.pick(["1", "0", "-3", "abc", "99999999999999999999"])}/replay`, contentType: "application/json", ...noBody(rng) }),
  },
  "DELETE /deadletters/:id": {
    weight: 0.5,
    make: (rng) => ({ route: "DELETE /deadletters/:id", method: "DELETE", path: `/deadletters/${rng.pick(["1", "0", "-3", "abc", "99999999999999999999"])}`, contentType: "application/json", ...noBody(rng) }),
  },
  "POST /config/revisions": {
    weight: 1.2,
    make: (rng, ctx) => {
      const r = rng.next();
      let raw: unknown;
      let body: string;
      if (r < 0.45) {
        raw = companyVariant(rng);
        body = json({ company: raw });
      } else if (r < 0.65) {
        // Around the API's body cap (and the broker's max payload, which the stored revision must also fit).
        const target = rng.pick([MAX_BODY_BYTES - 1, MAX_BODY_BYTES, MAX_BODY_BYTES + 1, MAX_BODY_BYTES - 512, MAX_BODY_BYTES - 8192, 768 * 1024, 256 * 1024]);
        const c = companyVariant(rng);
        body = jsonOfBytes(rng, target, (pad) => ({ company: { ...c, mission: pad } }));
        raw = (JSON.parse(body) as { company: unknown }).company;
      } else if (r < 0.9) {
        raw = badCompany(rng);
        body = json({ company: raw });
      } else {
        raw = undefined;
        body = json(rng.pick([{}, { company: null }, { company: fuzzCompanyInput(), extra: 1 }, { company: "Fuzz" }, [fuzzCompanyInput()]]));
      }
      const expected = raw === undefined ? null : parsedCanonical(raw);
      return {
        route: "POST /config/revisions",
        method: "POST",
        path: "/config/revisions",
        body,
        contentType: "application/json",
        expect: (a) => {
          if (typeof a.digest === "string") ctx.digests.push(a.digest);
          return revisionReadbacks(expected, null)(a);
        },
      };
    },
  },
  "POST /config/revisions/:digest/activate": {
    weight: 0.6,
    make: (rng, ctx) => {
      const digest =
        ctx.digests.length > 0 && rng.chance(0.7)
          ? rng.pick(ctx.digests)
          : rng.pick([companyDigest(fuzzCompany()), "0".repeat(64), "A".repeat(64), "abc", "f".repeat(65), "%00", "g".repeat(64)]);
      return { route: "POST /config/revisions/:digest/activate", method: "POST", path: `/config/revisions/${digest}/activate`, contentType: "application/json", ...noBody(rng), expect: revisionReadbacks(null, digest) };
    },
  },
  "POST /agents/:handle/pause": {
    weight: 0.6,
    make: (rng) => {
      const handle = seatParam(rng);
      return { route: "POST /agents/:handle/pause", method: "POST", path: `/agents/${handle}/pause`, contentType: "application/json", ...noBody(rng), expect: (a) => (a.handle === handle ? [{ kind: "paused", handle, paused: a.paused }] : []) };
    },
  },
  "POST /agents/:handle/resume": {
    weight: 0.5,
    make: (rng) => {
      const handle = seatParam(rng);
      return { route: "POST /agents/:handle/resume", method: "POST", path: `/agents/${handle}/resume`, contentType: "application/json", ...noBody(rng), expect: (a) => (a.handle === handle ? [{ kind: "paused", handle, paused: null }] : []) };
    },
  },
  "POST /agents/:handle/stop": {
    weight: 0.4,
    make: (rng) => {
      const handle = seatParam(rng);
      return {
        route: "POST /agents/:handle/stop",
        method: "POST",
        path: `/agents/${handle}/stop`,
        contentType: "application/json",
        ...noBody(rng),
        expect: (a) => {
          const id = (a.stop as { id?: unknown } | undefined)?.id;
          return typeof id === "string" ? [{ kind: "stop", handle, id }] : [];
        },
      };
    },
  },
  "POST /hooks/:kind/:id": {
    weight: 1.5,
    // No bearer token decides here: a missing or wrong signature is 401.
    allowed: [401],
    make: (rng, ctx) => {
      const [kind, id] = rng.chance(0.7) ? ["generic", FUZZ_HOOK.id] : rng.pick<[string, string]>([["github", FUZZ_HOOK.id], ["generic", "nope"], ["slack", FUZZ_HOOK.id], ["nope", FUZZ_HOOK.id], ["generic", "%00"]]);
      // A delivery sent again (a provider's retry): answered as a duplicate, published once.
      const body = ctx.hookBodies.length > 0 && rng.chance(0.08) ? rng.pick(ctx.hookBodies) : hookPayload(rng);
      const s = rng.next();
      const signature = s < 0.75 ? signGeneric(FUZZ_HOOK.secret, body) : s < 0.85 ? null : s < 0.93 ? "sha256=" + "0".repeat(64) : signGeneric(FUZZ_HOOK.secret, body + " ");
      const text = hookText(body);
      return {
        route: "POST /hooks/:kind/:id",
        method: "POST",
        path: `/hooks/${kind}/${id}`,
        body,
        contentType: "application/json",
        headers: signature === null ? {} : { [rng.pick(["x-signature-256", "X-Signature-256"])]: signature },
        expect: (a) => {
          if (typeof a.delivery !== "string") return [];
          if (a.accepted === true) {
            ctx.hookBodies.push(body);
            return [{ kind: "notification", delivery: a.delivery, body: text, seats: (a.seats as string[] | undefined) ?? null }];
          }
          return [{ kind: "notification", delivery: a.delivery, body: null, seats: null }];
        },
      };
    },
  },
  "POST /fleet/drain": { weight: 0.15, make: drainRequest("POST /fleet/drain", "/fleet/drain") },
  "POST /query/fleet/drain": { weight: 0.15, make: drainRequest("POST /query/fleet/drain", "/query/fleet/drain") },
};

const WEIGHTED = Object.entries(GENERATORS);
const TOTAL_WEIGHT = WEIGHTED.reduce((s, [, g]) => s + g.weight, 0);

/** One generated request for a route chosen at random, by weight. */
export function generate(rng: Rng, ctx: FuzzContext): FuzzRequest {
  let at = rng.next() * TOTAL_WEIGHT;
  let gen = WEIGHTED[WEIGHTED.length - 1]![1];
  for (const [, g] of WEIGHTED) {
    at -= g.weight;
    if (at < 0) {
      gen = g;
      break;
    }
  }
  const req = gen.make(rng, ctx);
  // Now and then, whatever the route: a body that is not JSON, or not declared as JSON. A
  // drain is left as generated (refusal-only: `{}` would drain the node).
  if (req.route.endsWith("/drain")) return req;
  if (rng.chance(0.02)) req.body = rng.pick(["{", "[1,2", "null", '"str"', "{}", "\u0000"]);
  if (rng.chance(0.02)) req.contentType = "text/plain";
  return req;
}

/** Statuses a write route may answer a client's input with; anything else is a failure. */
/** The run the fuzz node holds, for the cancel route (test/estate/fuzz-node.ts). */
export const FUZZ_RUN_ID = "run-fuzz-0000001";

export const ALLOWED_STATUSES = new Set([200, 201, 202, 400, 404, 409, 413, 415, 422]);

const READ_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** The write routes an app serves, as its route table names them. */
export function writeRoutes(app: Hono<AuthEnv>): string[] {
  return routeTable(app)
    .filter((r) => !READ_METHODS.has(r.method))
    .map((r) => `${r.method} ${r.path}`)
    .sort();
}

const SRC_DIR = join(import.meta.dir, "../../src");
const WRITE_DECLARATION = /\bapp\.(post|put|patch|delete)\(\s*"([^"]*)"/g;

/** Every write route declared in src/ (a group's own method and sub-path), by file. */
export function declaredWriteRoutes(dir = SRC_DIR): { file: string; method: string; sub: string }[] {
  const out: { file: string; method: string; sub: string }[] = [];
  for (const file of readdirSync(dir, { recursive: true, encoding: "utf8" })) {
    if (!file.endsWith(".ts")) continue;
    for (const m of readFileSync(join(dir, file), "utf8").matchAll(WRITE_DECLARATION)) out.push({ file, method: m[1]!.toUpperCase(), sub: m[2]! === "/" ? "" : m[2]! });
  }
  return out;
}

/**
 * Why this fuzzer does not cover every write route, or []: a route in the app's table with
 * no generator, a generator for a route the app does not serve, or a write route declared
 * in src/ that no mounted route matches (a group startFuzzNode does not mount).
 */
export function coverage(app: Hono<AuthEnv>): string[] {
  const routes = writeRoutes(app);
  const problems: string[] = [];
  for (const r of routes) if (!GENERATORS[r]) problems.push(`${r}: no generator (add one to GENERATORS in test/estate/fuzz.ts)`);
  for (const g of Object.keys(GENERATORS)) if (!routes.includes(g)) problems.push(`${g}: a generator for a route the app does not serve`);
  for (const d of declaredWriteRoutes()) {
    if (!routes.some((r) => r.startsWith(`${d.method} `) && r.endsWith(d.sub))) problems.push(`${d.method} …${d.sub} (src/${d.file}): declared but not mounted by startFuzzNode (test/estate/fuzz-node.ts)`);
  }
  return problems;
}

type App = Hono<AuthEnv>;

export interface FuzzReport {
  sent: number;
  statuses: Record<string, number>;
  byRoute: Record<string, Record<string, number>>;
  failures: string[];
  readbacks: number;
  wall_ms: number;
}

/** Sends `count` generated requests round-robin to `apps`; collects what must read back. */
export async function fuzzWrites(o: { apps: App[]; count: number; seed: number }): Promise<{ report: FuzzReport; readbacks: Readback[] }> {
  const rng = prng(o.seed);
  const ctx: FuzzContext = { created: [], messages: [], digests: [], hookBodies: [] };
  const readbacks: Readback[] = [];
  const report: FuzzReport = { sent: 0, statuses: {}, byRoute: {}, failures: [], readbacks: 0, wall_ms: 0 };
  const started = performance.now();
  for (let i = 0; i < o.count; i++) {
    const req = generate(rng, ctx);
    const app = o.apps[i % o.apps.length]!;
    const headers: Record<string, string> = { authorization: `Bearer ${FUZZ_TOKEN}`, ...req.headers };
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
    if (!ALLOWED_STATUSES.has(res.status) && !GENERATORS[req.route]?.allowed?.includes(res.status)) {
      report.failures.push(`#${i} ${req.method} ${req.path.slice(0, 120)} → ${res.status}: ${text.slice(0, 300)}`);
      continue;
    }
    if (res.status >= 400) {
      // A refusal names what is wrong, in the one error shape.
      let err: { code?: unknown; message?: unknown } | undefined;
      try {
        err = (JSON.parse(text) as { error?: typeof err }).error;
      } catch {
        // reported below
      }
      if (typeof err?.code !== "string" || typeof err.message !== "string") report.failures.push(`#${i} ${req.path.slice(0, 120)} → ${res.status} without an error body: ${text.slice(0, 200)}`);
      continue;
    }
    if (req.route.endsWith("/drain")) report.failures.push(`#${i} ${req.method} ${req.path} with ${JSON.stringify(req.body)} (${req.contentType}) → ${res.status}: a drain the fuzzer meant to be refused was accepted`);
    const answer = JSON.parse(text) as Record<string, unknown>;
    if (req.route === "POST /work" && typeof answer.key === "string") ctx.created.push(answer.key);
    if (req.route === "POST /chat/channels/:id/messages" && typeof answer.message_id === "string") ctx.messages.push(answer.message_id);
    readbacks.push(...(req.expect?.(answer) ?? []));
  }
  report.wall_ms = performance.now() - started;
  return { report, readbacks };
}

