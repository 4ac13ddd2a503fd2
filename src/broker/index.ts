// The broker as the node composition sees it: start what the plan says (a member or a leaf
// sidecar, or nothing for external NATS) and hand back how to connect, when it is ready,
// how to stop it, and a promise that says if it died.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { credsAuthenticator, type ConnectionOptions } from "nats";
import type { Clock } from "../clock.ts";
import type { Logger } from "../log.ts";
import { locateSidecarBinary } from "./binary.ts";
import { renderNatsConfig } from "./nats-config.ts";
import { brokerPaths, type BrokerKind, type BrokerPlan, type EmbeddedPlan } from "./plan.ts";
import { startSidecar, type SidecarSpec } from "./sidecar.ts";

export { natsServerVersion, type SidecarVersion } from "./binary.ts";
export { BrokerError } from "./sidecar.ts";
export * from "./plan.ts";
export { renderNatsConfig } from "./nats-config.ts";

/** Spread into nats.connect() beside `servers`: this boot's credential, or the external creds. */
export type ConnectAuth = Pick<ConnectionOptions, "user" | "pass" | "authenticator">;

export interface RunningBroker {
  kind: BrokerKind;
  /** Where this node's one NATS connection goes. */
  clientUrls: string[];
  connectAuth: ConnectAuth;
  /** http://127.0.0.1:port of the sidecar's monitor, or null for external NATS. */
  monitorUrl: string | null;
  /** The sidecar's pid, or null for external NATS. */
  pid: number | null;
  /** Resolves when the broker can serve JetStream (external NATS: at once). */
  ready: Promise<void>;
  /** Why the broker is not ready, or null once it is: for GET /ready. */
  notReadyReason(): string | null;
  /** Resolves with the reason if the sidecar dies unasked; never resolves for external NATS. */
  died: Promise<Error>;
  /** Stops the sidecar (SIGTERM, bounded wait, SIGKILL). No-op for external NATS. */
  stop(): Promise<void>;
}

function listenersOf(plan: EmbeddedPlan): SidecarSpec["listeners"] {
  const out: SidecarSpec["listeners"] = [
    { name: "client", host: plan.client.host, port: plan.client.port },
    { name: "monitor", host: "127.0.0.1", port: plan.monitorPort },
  ];
  if (plan.kind === "member" && plan.cluster) out.push({ name: "cluster", host: plan.cluster.host, port: plan.cluster.port });
  if (plan.kind === "member" && plan.leafListener) out.push({ name: "leafnode", host: plan.leafListener.host, port: plan.leafListener.port });
  return out;
}

function clientUrl(plan: EmbeddedPlan): string {
  const host = plan.client.host === "0.0.0.0" ? "127.0.0.1" : plan.client.host;
  return `nats://${host.includes(":") ? `[${host}]` : host}:${plan.client.port}`;
}

export async function startBroker(plan: BrokerPlan, deps: { log: Logger; clock: Clock }): Promise<RunningBroker> {
  const log = deps.log;
  if (plan.kind === "none") {
    log.info("broker_external", { servers: plan.servers });
    return {
      kind: "none",
      clientUrls: plan.servers,
      connectAuth: plan.credentialsFile ? { authenticator: credsAuthenticator(readFileSync(plan.credentialsFile)) } : {},
      monitorUrl: null,
      pid: null,
      ready: Promise.resolve(),
      notReadyReason: () => null,
      died: new Promise<Error>(() => undefined),
      stop: async () => undefined,
    };
  }

  const paths = brokerPaths(plan.storeDir);
  mkdirSync(paths.brokerDir, { recursive: true, mode: 0o700 });
  if (plan.kind === "member") mkdirSync(paths.streamDir, { recursive: true, mode: 0o700 });
  const binary = await locateSidecarBinary(paths.binDir, log);
  // 0600: the file holds this boot's client password and the digests of the shared secrets.
  writeFileSync(paths.configFile, renderNatsConfig(plan, binary.version), { mode: 0o600 });
  const sidecar = await startSidecar(
    {
      binary: binary.path,
      configFile: paths.configFile,
      pidFile: paths.pidFile,
      monitorPort: plan.monitorPort,
      listeners: listenersOf(plan),
    },
    deps,
  );
  return {
    kind: plan.kind,
    clientUrls: [clientUrl(plan)],
    connectAuth: { user: plan.credential.user, pass: plan.credential.password },
    monitorUrl: `http://127.0.0.1:${plan.monitorPort}`,
    pid: sidecar.pid,
    ready: sidecar.ready,
    notReadyReason: sidecar.notReadyReason,
    died: sidecar.died,
    stop: sidecar.stop,
  };
}
