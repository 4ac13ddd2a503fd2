// crewlet version: this build, the lease protocol it speaks, the nats-server it would run.
import { natsServerVersion } from "../broker/binary.ts";
import { LEASE_PROTOCOL } from "../coord/contract.ts";
import { CREWLET_VERSION, platformArch } from "../version.ts";
import { parseFlags } from "./args.ts";

export function runVersion(args: string[]): number {
  const { values } = parseFlags(args, { json: { type: "boolean" } }, 0);
  const nats = natsServerVersion();
  const info = {
    crewlet: CREWLET_VERSION,
    lease_protocol: LEASE_PROTOCOL,
    nats_server: nats.version,
    nats_server_source: nats.source,
    nats_server_arch: nats.arch,
    arch: platformArch(),
  };
  if (values.json) {
    console.log(JSON.stringify(info));
  } else {
    console.log(`crewlet ${info.crewlet} (${info.arch})`);
    console.log(`lease protocol ${info.lease_protocol}`);
    console.log(
      nats.version
        ? `nats-server ${nats.version} (${nats.arch ?? "unknown arch"}, ${nats.source})`
        : `nats-server not found (${nats.detail ?? nats.source})`,
    );
  }
  return 0;
}
