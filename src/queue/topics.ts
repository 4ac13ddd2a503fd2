// Every subject, group, stream and durable name on the wire comes from here
// (ARCHITECTURE.md § "Names on the wire"). Pure: names in, names out, no I/O.
import { z } from "zod";
import type { MailboxKind, MailboxRef } from "./contract.ts";

export const MAILBOX_KINDS: readonly MailboxKind[] = ["inbox", "control", "reflect"];

/**
 * A handle becomes one subject token, so it may not hold the characters NATS gives meaning
 * to ('.', '*', '>', whitespace). Anything else the org model allows passes; the durable
 * name escapes what a consumer name cannot carry.
 */
export const HandleSchema = z
  .string()
  .min(1, "handle is empty")
  .max(128, "handle is longer than 128 characters")
  .regex(/^[^.*>\s]+$/, "handle may not contain '.', '*', '>' or whitespace");

function checkHandle(handle: string): string {
  const parsed = HandleSchema.safeParse(handle);
  if (!parsed.success) throw new Error(`invalid seat handle ${JSON.stringify(handle)}: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}

// ---- streams ----------------------------------------------------------------------------

/**
 * Seat mail streams, a seat's chosen by a hash of its handle: sixteen raft groups spread the
 * streams' leaders (and their purges) over the members' cores at a fixed cost. Kept from the
 * interest-retained shards so their mail moves shard to shard; it is part of the wire.
 */
export const AGENT_SHARDS = 16;
/** The stream one shard's mail lives in: `CREWLET_SEATS_07`. */
export function agentStream(shard: number): string {
  return `CREWLET_SEATS_${shardToken(shard)}`;
}
export const AGENT_STREAMS: readonly string[] = Array.from({ length: AGENT_SHARDS }, (_, i) => agentStream(i));
/**
 * Before the shards, all seat mail was one stream on `crewlet.agent.>`. A node of this build
 * forwards what such a stream still holds (src/queue/legacy-mail.ts) and never writes to it;
 * the shards live under their own prefix so both can exist while an older node still does.
 */
export const LEGACY_AGENT_STREAM = "CREWLET_AGENT";
/**
 * Before mail was limits-retained (lease protocol 8), each shard was an interest-retained
 * stream `CREWLET_AGENT_07` on `crewlet.mail.07.>`, with an R3 consumer per mailbox: a raft
 * group each, which three members could not hold for 10,000 seats (issue 34). Their mail is
 * forwarded to the seat's stream of this build, as the single legacy stream's is.
 */
export function interestShardStream(shard: number): string {
  return `CREWLET_AGENT_${shardToken(shard)}`;
}
export const INTEREST_SHARD_STREAMS: readonly string[] = Array.from({ length: AGENT_SHARDS }, (_, i) => interestShardStream(i));
/** Every earlier build's mail stream, in the order a pass of the mail move takes them. */
export const LEGACY_MAIL_STREAMS: readonly string[] = [LEGACY_AGENT_STREAM, ...INTEREST_SHARD_STREAMS];
export const STREAM_NOTIFICATIONS = "CREWLET_NOTIFICATIONS";
export const STREAM_EVENTS = "CREWLET_EVENTS";
export const STREAM_DLQ = "CREWLET_DLQ";
export const STREAM_AUDIT = "CREWLET_AUDIT";

/** `crewlet.seats.{shard}.>`: what one shard's stream captures. */
export function agentSubjects(shard: number): string {
  return `crewlet.seats.${shardToken(shard)}.>`;
}

function shardToken(shard: number): string {
  if (!Number.isInteger(shard) || shard < 0 || shard >= AGENT_SHARDS) throw new Error(`invalid mail shard ${shard}`);
  return String(shard).padStart(2, "0");
}

/**
 * The shard a seat's mail lives in: FNV-1a (32-bit) over the handle's UTF-8 bytes, finished
 * with murmur3's fmix32, mod AGENT_SHARDS. The finish is not decoration: FNV's low bits depend
 * only on each byte's low bits (`x` and `x-control` always fell in related shards) and its
 * high bits barely move with a name's last character (`agent-0` … `agent-1999` spread 63 to
 * 199 a shard). Every node and every build must compute the same, so it is spelled out here.
 */
export function agentShard(handle: string): number {
  let h = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(handle)) {
    h ^= byte;
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) % AGENT_SHARDS;
}
export const NOTIFICATIONS_SUBJECT = "crewlet.notifications.inbound";
export const NOTIFICATIONS_GROUP = "notify-inbound";
export const EVENTS_SUBJECTS = "crewlet.events.>";
export const DLQ_SUBJECTS = "dlq.>";
export const AUDIT_SUBJECTS = "crewlet.audit.>";

/** `crewlet.audit.{node}`: the audit entries a node's API recorded (src/api/audit.ts). */
export function auditSubject(node: string): string {
  return `crewlet.audit.${checkToken(node)}`;
}

export const STATE_LOG_DOMAINS = ["tracker", "pages", "chat"] as const;
export type StateLogDomain = (typeof STATE_LOG_DOMAINS)[number];

/** `CREWLET_TRACKER_LOG` etc.; the estate creates these streams, the names live here. */
export function stateLogStream(domain: StateLogDomain): string {
  return `CREWLET_${domain.toUpperCase()}_LOG`;
}
/** `crewlet.{domain}.log.>`: what the state-log stream captures. */
/** The group every data node's wake feed for `domain` joins (src/estate/wake.ts). */
export function wakeGroup(domain: StateLogDomain): string {
  return `wake-${domain}`;
}

export function stateLogSubjects(domain: StateLogDomain): string {
  return `crewlet.${domain}.log.>`;
}
/** One record's subject; `parts` are subject tokens (e.g. entity kind and id). */
export function stateLogSubject(domain: StateLogDomain, ...parts: string[]): string {
  return `crewlet.${domain}.log.${parts.map(checkToken).join(".")}`;
}

/** `crewlet.events.{name}`; `name` may be dotted (e.g. `seat.claimed`). */
export function eventSubject(name: string): string {
  return `crewlet.events.${name.split(".").map(checkToken).join(".")}`;
}

function checkToken(token: string): string {
  if (!/^[^.*>\s]+$/.test(token)) throw new Error(`invalid subject token ${JSON.stringify(token)}`);
  return token;
}

/** The stream that captures `subject`, or null when none of ours does. */
export function streamForSubject(subject: string): string | null {
  const mail = /^crewlet\.(seats|mail)\.(\d\d)\./.exec(subject);
  if (mail) {
    const shard = Number(mail[2]);
    if (shard >= AGENT_SHARDS) return null;
    return mail[1] === "seats" ? agentStream(shard) : interestShardStream(shard);
  }
  if (subject.startsWith("crewlet.agent.")) return LEGACY_AGENT_STREAM;
  if (subject === NOTIFICATIONS_SUBJECT) return STREAM_NOTIFICATIONS;
  if (subject.startsWith("crewlet.events.")) return STREAM_EVENTS;
  if (subject.startsWith("dlq.")) return STREAM_DLQ;
  if (subject.startsWith("crewlet.audit.")) return STREAM_AUDIT;
  for (const domain of STATE_LOG_DOMAINS) {
    if (subject.startsWith(`crewlet.${domain}.log.`)) return stateLogStream(domain);
  }
  return null;
}

// ---- seat mailboxes ---------------------------------------------------------------------

/** `crewlet.seats.{shard}.{handle}.{kind}`: the shard token first, so a stream captures it by prefix. */
export function mailboxSubject(handle: string, kind: MailboxKind): string {
  const h = checkHandle(handle);
  return `crewlet.seats.${shardToken(agentShard(h))}.${h}.${kind}`;
}

/** Where a seat's mailbox was while the shards were interest-retained (interestShardStream). */
export function interestMailboxSubject(handle: string, kind: MailboxKind): string {
  const h = checkHandle(handle);
  return `crewlet.mail.${shardToken(agentShard(h))}.${h}.${kind}`;
}

/** The stream a seat's mail lives in. */
export function mailboxStream(handle: string): string {
  return agentStream(agentShard(checkHandle(handle)));
}

/** Where a seat's mailbox was before the shards (LEGACY_AGENT_STREAM). */
export function legacyMailboxSubject(handle: string, kind: MailboxKind): string {
  return `crewlet.agent.${checkHandle(handle)}.${kind}`;
}

export function mailboxGroup(handle: string, kind: MailboxKind): string {
  const h = checkHandle(handle);
  return kind === "inbox" ? `agent-${h}` : `agent-${h}-${kind}`;
}

export interface MailboxName {
  subject: string;
  group: string;
}

export function mailbox(handle: string, kind: MailboxKind): MailboxName {
  return { subject: mailboxSubject(handle, kind), group: mailboxGroup(handle, kind) };
}

/**
 * The mailboxes the walk gives every seat. The control subject a coding run reports on is
 * made only for a seat with a sandbox, at acquisition (sandbox/seat-runs.ts): each R3
 * mailbox is a raft group on every member, and three a seat at 2,000 seats took a 2-core box.
 */
export const SEAT_MAILBOX_KINDS: readonly MailboxKind[] = ["inbox", "reflect"];

export function seatMailboxes(handle: string): MailboxName[] {
  return SEAT_MAILBOX_KINDS.map((kind) => mailbox(handle, kind));
}

/**
 * Every mailbox the grammar gives a seat, which a retirement deletes: a control mailbox an
 * earlier build made holds the seat's name as much as its inbox does.
 */
export function allSeatMailboxes(handle: string): MailboxName[] {
  return MAILBOX_KINDS.map((kind) => mailbox(handle, kind));
}

/**
 * The seat mailbox a (subject, group) pair is, or null. Judged from the subject (which is
 * unambiguous: a handle holds no '.') and then the group checked against the grammar,
 * because the group alone is not: `agent-bob-control` is bob's control group and also the
 * inbox group of a seat called `bob-control`. A consumer on a seat's subject under any
 * other group is somebody else's and is not a mailbox.
 */
export function parseMailbox(subject: string, group: string): MailboxRef | null {
  const m = /^crewlet\.seats\.(\d\d)\.([^.*>\s]+)\.(inbox|control|reflect)$/.exec(subject);
  if (!m) return null;
  const ref = mailboxRef(m[2]!, m[3] as MailboxKind, group);
  // A shard token the handle does not hash to is no mailbox this grammar makes.
  return ref && Number(m[1]) === agentShard(ref.handle) ? ref : null;
}

/**
 * The handle and kind an earlier build's mailbox subject names: one of the single stream
 * before the shards (`crewlet.agent.{handle}.{kind}`) or of an interest-retained shard
 * (`crewlet.mail.{shard}.{handle}.{kind}`, the shard the handle hashes to); else null.
 */
function legacyMailboxOf(subject: string): { handle: string; kind: MailboxKind } | null {
  const single = /^crewlet\.agent\.([^.*>\s]+)\.(inbox|control|reflect)$/.exec(subject);
  const shard = /^crewlet\.mail\.(\d\d)\.([^.*>\s]+)\.(inbox|control|reflect)$/.exec(subject);
  const [handle, kind] = single ? [single[1]!, single[2]!] : shard ? [shard[2]!, shard[3]!] : [null, null];
  if (handle === null || !HandleSchema.safeParse(handle).success) return null;
  if (shard && Number(shard[1]) !== agentShard(handle)) return null;
  return { handle, kind: kind as MailboxKind };
}

/**
 * The subject a mailbox subject names now: a seat's subject of an earlier build becomes its
 * current one (a dead letter kept from before an upgrade is replayed to where its seat
 * reads); any other subject is itself.
 */
export function currentMailboxSubject(subject: string): string {
  const old = legacyMailboxOf(subject);
  return old ? mailboxSubject(old.handle, old.kind) : subject;
}

/** As parseMailbox, for a subject of an earlier build's mail streams (legacyMailboxOf). */
export function parseLegacyMailbox(subject: string, group: string): MailboxRef | null {
  const old = legacyMailboxOf(subject);
  return old ? mailboxRef(old.handle, old.kind, group) : null;
}

function mailboxRef(handle: string, kind: MailboxKind, group: string): MailboxRef | null {
  if (!HandleSchema.safeParse(handle).success) return null;
  return mailboxGroup(handle, kind) === group ? { handle, kind } : null;
}

/**
 * Every (handle, kind) a group name could belong to, ignoring the subject. Used where only
 * a name is at hand (a consumer name listing); parseMailbox with the subject decides.
 */
export function groupCandidates(group: string): MailboxRef[] {
  if (!group.startsWith("agent-")) return [];
  const rest = group.slice("agent-".length);
  const out: MailboxRef[] = [];
  if (HandleSchema.safeParse(rest).success) out.push({ handle: rest, kind: "inbox" });
  for (const kind of ["control", "reflect"] as const) {
    const suffix = `-${kind}`;
    if (rest.endsWith(suffix)) {
      const handle = rest.slice(0, -suffix.length);
      if (HandleSchema.safeParse(handle).success) out.push({ handle, kind });
    }
  }
  return out;
}

// ---- durable consumer names -------------------------------------------------------------

/**
 * A JetStream durable name may not contain '.', '*', '>' or whitespace, and the broker's
 * listing hands back durable names only, so the mapping must be reversible: every byte
 * outside [A-Za-z0-9-] becomes `_HH` (so '_' itself is `_5f`). Groups the grammar produces
 * from plain handles pass through unchanged.
 */
export function durableName(group: string): string {
  if (group.length === 0) throw new Error("group is empty");
  let out = "";
  for (const byte of new TextEncoder().encode(group)) {
    const ch = String.fromCharCode(byte);
    out += /[A-Za-z0-9-]/.test(ch) ? ch : `_${byte.toString(16).padStart(2, "0")}`;
  }
  return out;
}

/** The group a durable name was derived from, or null if durableName could not have made it. */
export function groupOfDurable(durable: string): string | null {
  const bytes: number[] = [];
  for (let i = 0; i < durable.length; ) {
    const ch = durable[i]!;
    if (/[A-Za-z0-9-]/.test(ch)) {
      bytes.push(ch.charCodeAt(0));
      i += 1;
    } else if (ch === "_" && /^[0-9a-f]{2}$/.test(durable.slice(i + 1, i + 3))) {
      bytes.push(parseInt(durable.slice(i + 1, i + 3), 16));
      i += 3;
    } else {
      return null;
    }
  }
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array(bytes));
  } catch {
    return null;
  }
}

// ---- dead letters -----------------------------------------------------------------------

/**
 * `dlq.{topic}.{group}.{digest}`: topic is the original subject (its dots become tokens),
 * group the durable-safe group, digest names the one message so two dead letters of one
 * mailbox never share a subject.
 */
export function dlqSubject(subject: string, group: string, digest: string): string {
  return `dlq.${subject}.${durableName(group)}.${checkToken(digest)}`;
}

/** NATS subject matching: `*` is one token, a trailing `>` one or more. */
export function subjectMatches(pattern: string, subject: string): boolean {
  const p = pattern.split(".");
  const s = subject.split(".");
  for (let i = 0; i < p.length; i++) {
    const tok = p[i]!;
    if (tok === ">") return s.length > i;
    if (i >= s.length) return false;
    if (tok !== "*" && tok !== s[i]) return false;
  }
  return p.length === s.length;
}
