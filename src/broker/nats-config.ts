// Renders a nats-server.conf from a BrokerPlan. Pure: same plan in, same text out, so every
// topology is a table test and the sidecar code only writes what this returns.
import {
  brokerPaths,
  derivePassword,
  LEAF_USER,
  ROUTE_USER,
  type EmbeddedPlan,
  type LeafPlan,
  type MemberPlan,
} from "./plan.ts";

/** Bytes that stand for themselves inside a double-quoted nats-server string. */
const PLAIN = /^[A-Za-z0-9 ._\-/:@+=,]$/;

/**
 * A nats-server double-quoted string for any text. Everything outside a small plain set
 * is written as \xXX per UTF-8 byte (the conf lexer's escape), so quotes, backslashes,
 * '$' (a variable reference elsewhere in the format), '#', newlines and non-ASCII all
 * arrive as the bytes they were.
 */
export function quote(text: string): string {
  let out = '"';
  for (const byte of new TextEncoder().encode(text)) {
    const ch = String.fromCharCode(byte);
    out += byte < 0x80 && PLAIN.test(ch) ? ch : `\\x${byte.toString(16).padStart(2, "0")}`;
  }
  return out + '"';
}

function hostPort(host: string, port: number): string {
  return quote(`${host}:${port}`);
}

/** Strips any scheme and userinfo an operator wrote, keeping host:port. */
function bareHostPort(address: string): string {
  const noScheme = address.replace(/^[a-z-]+:\/\//i, "");
  const at = noScheme.lastIndexOf("@");
  return (at >= 0 ? noScheme.slice(at + 1) : noScheme).replace(/\/+$/, "");
}

function commonLines(plan: EmbeddedPlan): string[] {
  return [
    `server_name: ${quote(plan.nodeId)}`,
    `listen: ${hostPort(plan.client.host, plan.client.port)}`,
    `http: ${hostPort("127.0.0.1", plan.monitorPort)}`,
    // Our logger stamps the time; nats-server's own stamp would be a second clock on the line.
    "logtime: false",
    "debug: false",
    "trace: false",
    "authorization {",
    "  users: [",
    `    { user: ${quote(plan.credential.user)}, password: ${quote(plan.credential.password)} }`,
    ...(plan.supervisor ? [supervisorUser(plan.supervisor, plan.kind === "member" ? plan.jetstream.domain : plan.jetstreamDomain)] : []),
    "  ]",
    "}",
  ];
}

/**
 * A run's supervisor, the one process outside the node with a credential, may publish to
 * seats' control subjects and watch the run records, nothing else. Each API subject is also
 * granted under the domain: a leaf maps plain API subjects onto it before checking them.
 * `crewlet.mail.*.*.control` is where a supervisor an earlier build started (runs outlive a
 * binary swap) still reports; the mail move forwards it to the seat (queue/legacy-mail.ts).
 */
export function supervisorPublish(domain: string): string[] {
  const api = ["INFO", "STREAM.INFO.KV_crewlet_runs", "CONSUMER.CREATE.KV_crewlet_runs", "CONSUMER.CREATE.KV_crewlet_runs.>", "CONSUMER.DELETE.KV_crewlet_runs.>", "CONSUMER.INFO.KV_crewlet_runs.>"];
  return ["crewlet.seats.*.*.control", "crewlet.mail.*.*.control", ...api.flatMap((a) => [`$JS.API.${a}`, `$JS.${domain}.API.${a}`]), "$JS.FC.>"];
}
/** Its replies, and the sandbox-waiter's "are you there" (answered through allow_responses). */
export const SUPERVISOR_SUBSCRIBE = ["_INBOX.>", "crewlet.sandbox.ping.*"];

function supervisorUser(cred: { user: string; password: string }, domain: string): string {
  const list = (xs: string[]) => `[${xs.map(quote).join(", ")}]`;
  return `    { user: ${quote(cred.user)}, password: ${quote(cred.password)}, permissions: { publish: { allow: ${list(supervisorPublish(domain))} }, subscribe: { allow: ${list(SUPERVISOR_SUBSCRIBE)} }, allow_responses: true } }`;
}

/**
 * nats-server 2.15 caps consumers per stream at 1,000 unless the stream or account sets a
 * finite limit (-1, "unlimited", counts as unset there), and the agent stream holds three
 * mailboxes per seat: 334 seats would already be refused ("maximum consumers limit
 * reached", measured by bench/queue.ts with 1,000 seats). Only the server-wide default can
 * lift it for streams that exist already (a stream's max_consumers cannot be edited), so
 * the config sets it to -1. Releases before 2.15 have no such cap and refuse the unknown
 * field, so it is written only for 2.15 and later (and when the version is unknown, which
 * the pinned release is).
 */
export function liftsConsumerCap(serverVersion: string | null): boolean {
  return from215(serverVersion);
}

/**
 * Disk calls a member's nats-server may have in flight at once (`jetstream {
 * max_concurrent_io }`). Each one it is waiting on holds an OS thread, and every R3 mailbox
 * is a raft group writing its own files: with the server's default (4,096, raised in 2.15
 * from at most 16 for devices that take many requests at once), three members walking 2,000
 * seats on one 2-core box with a virtual disk grew ~3,900 threads each, 11,000 in disk wait,
 * load 3,800, and the walk stalled at 3,199 of 4,000 mailboxes. Capped at 16 the same walk
 * finished in 86–96 s, and at 128 in 57–63 s with ~136 threads a member (bench/scale.ts
 * --seats 2000 --members 3): threads stay few on a small box, and a fast disk still gets a
 * deep queue. Written for 2.15 and later only: earlier releases refuse the field.
 */
export const MAX_CONCURRENT_IO = 128;

export function boundsConcurrentIo(serverVersion: string | null): boolean {
  return from215(serverVersion);
}

/** 2.15 or later, or unknown (which the pinned release is). */
function from215(serverVersion: string | null): boolean {
  if (serverVersion === null) return true;
  const m = /^(\d+)\.(\d+)\./.exec(serverVersion);
  if (!m) return true;
  const [major, minor] = [Number(m[1]), Number(m[2])];
  return major > 2 || (major === 2 && minor >= 15);
}

function memberLines(plan: MemberPlan, serverVersion: string | null): string[] {
  const lines = [
    "jetstream {",
    `  store_dir: ${quote(brokerPaths(plan.storeDir).streamDir)}`,
    `  max_mem: ${Math.floor(plan.jetstream.max_mem_bytes)}`,
    `  max_file: ${Math.floor(plan.jetstream.max_file_bytes)}`,
    `  domain: ${quote(plan.jetstream.domain)}`,
    ...(liftsConsumerCap(serverVersion) ? ["  limits { default_max_consumers: -1 }"] : []),
    ...(boundsConcurrentIo(serverVersion) ? [`  max_concurrent_io: ${MAX_CONCURRENT_IO}`] : []),
    "}",
  ];
  if (plan.cluster) {
    const c = plan.cluster;
    const self = `${c.host}:${c.port}`;
    const password = derivePassword("cluster", c.secret);
    const routes = c.routes
      .map(bareHostPort)
      .filter((r) => r !== self)
      .map((r) => quote(`nats-route://${ROUTE_USER}:${password}@${r}`));
    lines.push(
      "cluster {",
      `  name: ${quote(c.name)}`,
      `  listen: ${hostPort(c.host, c.port)}`,
      // Peers learn each other's route address by gossip; behind NAT or a proxy it must be
      // the address they can dial, not our listener.
      ...(c.advertise ? [`  advertise: ${quote(bareHostPort(c.advertise))}`] : []),
      "  authorization {",
      `    user: ${quote(ROUTE_USER)}`,
      `    password: ${quote(password)}`,
      "  }",
      `  routes: [${routes.length ? `\n    ${routes.join(",\n    ")}\n  ` : ""}]`,
      "}",
    );
  }
  if (plan.leafListener) {
    const l = plan.leafListener;
    lines.push(
      "leafnodes {",
      `  listen: ${hostPort(l.host, l.port)}`,
      ...(l.advertise ? [`  advertise: ${quote(bareHostPort(l.advertise))}`] : []),
      "  authorization {",
      `    user: ${quote(LEAF_USER)}`,
      `    password: ${quote(derivePassword("leaf", l.secret))}`,
      "  }",
      "}",
    );
  }
  return lines;
}

function leafLines(plan: LeafPlan): string[] {
  const password = derivePassword("leaf", plan.leafRemotes.secret);
  const urls = plan.leafRemotes.urls.map((u) => quote(`nats-leaf://${LEAF_USER}:${password}@${bareHostPort(u)}`));
  return [
    // A leaf holds no replica and casts no vote: JetStream stays off here.
    "jetstream: disabled",
    // Clients on this leaf use the plain JetStream API; the leaf maps it onto the members'
    // domain ("$G" is the account our users live in).
    `default_js_domain: { "$G": ${quote(plan.jetstreamDomain)} }`,
    "leafnodes {",
    "  remotes: [",
    "    {",
    `      urls: [${urls.join(", ")}]`,
    '      account: "$G"',
    "    }",
    "  ]",
    "}",
  ];
}

/** `serverVersion`: the nats-server release the config is for (e.g. "2.15.2"), null if unknown. */
export function renderNatsConfig(plan: EmbeddedPlan, serverVersion: string | null = null): string {
  const lines = [
    "# Rendered by crewlet at every boot from crewlet.yaml; edits here are overwritten.",
    ...commonLines(plan),
    ...(plan.kind === "member" ? memberLines(plan, serverVersion) : leafLines(plan)),
  ];
  return lines.join("\n") + "\n";
}
