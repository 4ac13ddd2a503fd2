// Tier A: this node's own settings (what it is willing to do, where it keeps things, how
// it reaches the fleet). Everything else is discovered from shared state at runtime.
// Unknown keys are refused everywhere (z.strictObject): a typo must not silently become
// a default.
import { z } from "zod";
import { DEFAULT_LEASE_TTL_MS } from "../coord/contract.ts";
import { companySchema } from "./company.ts";

export const NODE_ROLES = ["data", "ingress", "seats", "workers"] as const;
export type NodeRole = (typeof NODE_ROLES)[number];

export const GRANTS = [
  "state:read",
  "work:write",
  "knowledge:write",
  "chat:write",
  "config:read",
  "config:write",
  "fleet:operate",
  /** Pause, resume and stop a seat (POST /agents/{handle}/pause|resume|stop). */
  "agents:operate",
  /** Approve or reject a call an agent parked for a person's yes (POST /approvals/{id}/…). */
  "approvals:decide",
] as const;
export type Grant = (typeof GRANTS)[number];

/** The default node id every unconfigured node shares: fine alone, wrong in a fleet. */
export const DEFAULT_NODE_ID = "node-0";
/** Per node, not per company: an org's ceiling is N × this. */
export const DEFAULT_MAX_CONCURRENT = 32;
/** Tokens shorter than this are guessable; 24 chars of base64 is ~144 bits. */
export const MIN_TOKEN_CHARS = 24;
export const DEFAULT_API_PORT = 7700;
export const DEFAULT_CLIENT_PORT = 4222;
export const DEFAULT_MONITOR_PORT = 8222;
export const DEFAULT_CLUSTER_PORT = 6222;
export const DEFAULT_LEAF_PORT = 7422;

const hostPort = z
  .string()
  .regex(/^[A-Za-z0-9.\-\[\]:]+:\d{1,5}$/, "expected host:port");
const port = z.number().int().min(1).max(65535);
const labelMap = z.record(z.string().regex(/^[A-Za-z0-9_.\-]+$/, "label keys are letters, digits, _ . -"), z.string());

export const nodeSchema = z.strictObject({
  id: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9_\-]{0,62}$/, "node ids are letters, digits, _ and -, at most 63 chars")
    .optional()
    .describe("Distinct and stable per process; also the NATS server name on a clustered stream"),
  roles: z
    .array(z.enum(NODE_ROLES))
    .min(1)
    .default([...NODE_ROLES])
    .refine((r) => new Set(r).size === r.length, "roles are listed once each"),
  labels: labelMap.default({}),
  max_concurrent: z.number().int().min(1).max(4096).default(DEFAULT_MAX_CONCURRENT),
});

/** Where a node keeps its store unless `store.dir` says otherwise (the CLI looks here too). */
export const DEFAULT_STORE_DIR = ".crewlet";

export const storeSchema = z.strictObject({
  dir: z.string().min(1).default(DEFAULT_STORE_DIR),
  scratch: z.boolean().default(false).describe("Deleted at every boot: a leaf node's store"),
});

export const clusterSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_\-]+$/).default("crewlet"),
  host: z.string().min(1).default("127.0.0.1"),
  port: port.default(DEFAULT_CLUSTER_PORT),
  peers: z.array(hostPort).default([]).describe("The other members' cluster host:port"),
  secret: z.string().min(MIN_TOKEN_CHARS).optional(),
  advertise: hostPort.optional().describe("The host:port peers should dial for this member's routes when it differs from host:port (NAT, a proxy)"),
});

export const leafSchema = z.strictObject({
  port: port.optional().describe("On a member: listen for leaf nodes here"),
  host: z.string().min(1).default("127.0.0.1"),
  urls: z.array(z.string().min(1)).min(1).optional().describe("On a leaf: the members' leafnode URLs"),
  secret: z.string().min(MIN_TOKEN_CHARS).optional(),
  advertise: hostPort.optional().describe("On a member: the host:port leaves should dial for it when it differs from host:port (NAT, a proxy)"),
});

export const streamSchema = z.strictObject({
  type: z.enum(["embedded", "nats"]).default("embedded"),
  client_port: port.default(DEFAULT_CLIENT_PORT),
  monitor_port: port.default(DEFAULT_MONITOR_PORT),
  cluster: clusterSchema.optional(),
  replicas: z.number().int().min(1).max(5).default(1),
  leaf: leafSchema.optional(),
  domain: z.string().regex(/^[A-Za-z0-9_\-]+$/).default("crewlet").describe("JetStream domain members serve and leaves reach across"),
  url: z.string().min(1).optional().describe("External NATS (type: nats)"),
  credentials: z.string().min(1).optional().describe("Path to a .creds file for external NATS"),
});

export const coordinationSchema = z.strictObject({
  type: z.enum(["local", "embedded-kv"]).default("local"),
  lease_ttl_seconds: z.number().min(1).max(600).default(DEFAULT_LEASE_TTL_MS / 1000),
});

/** The object store bucket the company's files are in (src/objects), on the fleet's broker. */
export const DEFAULT_OBJECTS_BUCKET = "crewlet_files";

export const objectsSchema = z.strictObject({
  type: z.enum(["nats"]).default("nats").describe("Where the company's files are: nats (a bucket on the fleet's broker)"),
  bucket: z
    .string()
    .regex(/^[A-Za-z0-9_\-]{1,64}$/, "bucket names are 1–64 letters, digits, _ and -")
    .default(DEFAULT_OBJECTS_BUCKET)
    .describe("The object store bucket; every node of a fleet must name the same one"),
});

export const tokenSchema = z.strictObject({
  id: z.string().regex(/^[A-Za-z0-9_\-]{1,64}$/),
  token: z.string().min(MIN_TOKEN_CHARS, `tokens are at least ${MIN_TOKEN_CHARS} characters`),
  grants: z.array(z.enum(GRANTS)).default([...GRANTS]),
});

export const apiSchema = z.strictObject({
  host: z.string().min(1).default("127.0.0.1"),
  port: z.number().int().min(0).max(65535).default(DEFAULT_API_PORT),
  tokens: z.array(tokenSchema).default([]),
});

export const loggingSchema = z.strictObject({
  level: z.enum(["debug", "info", "warn", "error"]).default("info"),
  format: z.enum(["json", "text"]).default("json"),
  file: z.string().min(1).optional(),
  stderr: z.boolean().default(true),
});

/** The environment variable that admits the `testing` block: the test harness sets it, and
 * nothing else should, so `validate` and `run` refuse the block everywhere else. */
export const TESTING_ENV = "CREWLET_TESTING";

/** Shortenings of shipped numbers that only tests may use (each number's reason lives at
 * its definition; a deployment that shortened them would lose what the reason protects). */
export const testingSchema = z.strictObject({
  mailbox_grace_seconds: z.number().min(1).optional().describe("Removed-seat mailbox grace (shipped: 24 h)"),
  maintenance_tick_seconds: z.number().min(1).optional().describe("Maintenance sweep tick (shipped: 15 min)"),
  approvals_tick_seconds: z.number().min(1).optional().describe("Approvals expiry sweep tick (shipped: 1 min)"),
  learning_tick_seconds: z.number().min(1).optional().describe("Learning passes' tick; the duty's TTL is three ticks, at least 30 s (shipped: 1 h)"),
  objects_tick_seconds: z.number().min(1).optional().describe("Object collector tick (shipped: 1 h)"),
  objects_keep_seconds: z.number().min(0).optional().describe("How old an unnamed object must be before the collector deletes it (shipped: 1 day)"),
  retention_tick_seconds: z.number().min(1).optional().describe("State-log trim tick (shipped: 15 min)"),
  retention_margin_records: z.number().int().min(0).optional().describe("Records the trim keeps below the floor (shipped: 1,000)"),
  retention_unheard_hold_seconds: z.number().min(1).optional().describe("How long a copy unheard from holds the log (shipped: 24 h)"),
  retention_snapshot_max_age_seconds: z.number().min(0).optional().describe("How long the trim reuses a snapshot covering part of a purge (shipped: 6 h)"),
  mailbox_check_seconds: z.number().min(0.1).optional().describe("Deaf-seat watch's check cadence (shipped: 15 s)"),
  mailbox_probe_seconds: z.number().min(0.1).optional().describe("Each held seat's inbox probe cadence (shipped: 60 s)"),
  mailbox_probe_heard_seconds: z.number().min(0.1).optional().describe("A probe unheard this long while its seat is ready makes the seat deaf (shipped: 20 s)"),
  legacy_pass_seconds: z.number().min(1).optional().describe("Legacy-mail pass cadence: how soon an upgrade moves an older build's mail once no older node is alive (shipped: 1 min)"),
  lease_ttl_floor_seconds: z.number().min(1).optional().describe("Smallest lease TTL a replicated lease bucket accepts (shipped: 28 s, the worst leader election's)"),
});

export const tierASchema = z.strictObject({
  node: nodeSchema.default(nodeSchema.parse({})),
  store: storeSchema.default(storeSchema.parse({})),
  stream: streamSchema.default(streamSchema.parse({})),
  coordination: coordinationSchema.default(coordinationSchema.parse({})),
  api: apiSchema.default(apiSchema.parse({})),
  objects: objectsSchema.default(objectsSchema.parse({})),
  logging: loggingSchema.default(loggingSchema.parse({})),
  company: companySchema.optional().describe("The company seed this node activates when it differs from the active one"),
  testing: testingSchema.optional().describe(`Test-only settings; refused unless ${TESTING_ENV}=1`),
});

export type TierA = z.infer<typeof tierASchema>;
export type TierAInput = z.input<typeof tierASchema>;
