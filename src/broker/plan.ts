// What the node's broker should be, as plain data. The node composition builds a BrokerPlan
// from Tier A config; everything in src/broker/ works from this and never reads config.
import { createHash } from "node:crypto";

export type BrokerKind = "member" | "leaf" | "none";

/** Where local clients (this node's one NATS connection) reach the sidecar. */
export interface ClientListener {
  /** 127.0.0.1 unless the operator opened it; the config layer refuses wider without a secret. */
  host: string;
  port: number;
}

/** Minted at every boot and handed only to this process's own connection; never logged. */
export interface ClientCredential {
  user: string;
  password: string;
}

export interface JetStreamPlan {
  max_mem_bytes: number;
  max_file_bytes: number;
  /**
   * Every member names the same domain, always: a leaf's clients reach the members'
   * JetStream across a domain (found on 2.9; test/broker/cluster.test.ts holds it on the
   * pinned server), and a domain set from the first boot lets a leaf join a one-box
   * company later without touching its members.
   */
  domain: string;
}

export interface ClusterPlan {
  name: string;
  host: string;
  port: number;
  /** Peer route listeners as host:port. Our own listener may be in the list; it is skipped. */
  routes: string[];
  /** Shared by every member; any characters. */
  secret: string;
  /** host:port gossiped to peers for our routes, when they must dial something else (NAT, a proxy). */
  advertise?: string;
}

export interface LeafListenerPlan {
  host: string;
  port: number;
  secret: string;
  /** host:port gossiped to leaves for this listener, when they must dial something else. */
  advertise?: string;
}

export interface LeafRemotesPlan {
  /** The members' leafnode listeners as host:port (or nats-leaf://host:port). */
  urls: string[];
  secret: string;
}

interface EmbeddedCommon {
  /** server_name: JetStream places replicas by it, so it must be the stable node id. */
  nodeId: string;
  /** The node's store dir; the broker keeps stream/ and broker/ beneath it. */
  storeDir: string;
  client: ClientListener;
  credential: ClientCredential;
  /** The coding runs' supervisors' credential (src/sandbox/credential.ts), granted only
   *  their subjects; absent: no supervisor can connect. */
  supervisor?: ClientCredential;
  /** Monitor (/healthz, /varz) always listens on 127.0.0.1: only this node reads it. */
  monitorPort: number;
}

export interface MemberPlan extends EmbeddedCommon {
  kind: "member";
  jetstream: JetStreamPlan;
  cluster?: ClusterPlan;
  leafListener?: LeafListenerPlan;
  /** Stream replicas the node's queue and coordination will ask for (not a server setting). */
  replicas: number;
}

export interface LeafPlan extends EmbeddedCommon {
  kind: "leaf";
  leafRemotes: LeafRemotesPlan;
  /** The members' JetStream domain; the leaf maps its clients' plain JetStream API onto it. */
  jetstreamDomain: string;
}

export interface ExternalPlan {
  kind: "none";
  servers: string[];
  /** A NATS credentials file (JWT + nkey seed), when the external cluster wants one. */
  credentialsFile?: string;
  replicas: number;
}

export type BrokerPlan = MemberPlan | LeafPlan | ExternalPlan;
export type EmbeddedPlan = MemberPlan | LeafPlan;

/** The domain members use unless config names another. */
export const DEFAULT_JETSTREAM_DOMAIN = "crewlet";

/** 24 random bytes: beyond guessing for a credential that lives one boot. */
const CLIENT_PASSWORD_BYTES = 24;

export function mintClientCredential(): ClientCredential {
  const bytes = crypto.getRandomValues(new Uint8Array(CLIENT_PASSWORD_BYTES));
  return { user: "crewlet", password: Buffer.from(bytes).toString("base64url") };
}

/**
 * The password a shared secret becomes on the wire. Route and leafnode credentials travel
 * inside URLs (nats-route://user:pass@host), where an arbitrary secret would need escaping,
 * and nats-server reads a password that starts with "$2" as a bcrypt hash. A hex digest
 * has neither problem, every member derives the same one, and the operator's secret
 * itself never lands in the rendered file.
 */
export function derivePassword(purpose: "cluster" | "leaf", secret: string): string {
  return createHash("sha256").update(`crewlet/${purpose}/`).update(secret, "utf8").digest("hex");
}

export const ROUTE_USER = "route";
export const LEAF_USER = "leaf";

export interface BrokerPaths {
  /** JetStream's store_dir (nats-server adds its own jetstream/ beneath). */
  streamDir: string;
  /** The rendered config and the sidecar's pid file. */
  brokerDir: string;
  configFile: string;
  pidFile: string;
  /** Where the compiled binary extracts its embedded nats-server. */
  binDir: string;
}

export function brokerPaths(storeDir: string): BrokerPaths {
  const brokerDir = `${storeDir}/broker`;
  return {
    streamDir: `${storeDir}/stream`,
    brokerDir,
    configFile: `${brokerDir}/nats-server.conf`,
    pidFile: `${brokerDir}/nats-server.pid`,
    binDir: `${storeDir}/bin`,
  };
}
