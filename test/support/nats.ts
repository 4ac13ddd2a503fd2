// A real nats-server (JetStream on) on 127.0.0.1 for tests, in its own temp dir.
// The sidecar code in src/broker/ is what the node uses; this is the plain harness the
// contract suites run on, so a broker bug and a contract bug fail different tests.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type NatsConnection } from "nats";
import { freePort } from "./ports.ts";

export function natsServerBinary(): string {
  return process.env.CREWLET_NATS_SERVER ?? Bun.which("nats-server") ?? "/usr/sbin/nats-server";
}

export interface TestNats {
  url: string;
  port: number;
  dir: string;
  proc: ReturnType<typeof Bun.spawn>;
  connect(): Promise<NatsConnection>;
  stop(): Promise<void>;
}

export async function startNats(): Promise<TestNats> {
  const dir = mkdtempSync(join(tmpdir(), "crewlet-nats-"));
  const port = await freePort();
  const monitor = await freePort();
  const conf = join(dir, "nats.conf");
  writeFileSync(
    conf,
    `listen: "127.0.0.1:${port}"\nhttp: "127.0.0.1:${monitor}"\njetstream { store_dir: "${join(dir, "js")}", max_mem: 256MB, max_file: 1GB }\n`,
  );
  const proc = Bun.spawn([natsServerBinary(), "-c", conf], { stdout: "ignore", stderr: "ignore" });
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      const res = await fetch(`http://127.0.0.1:${monitor}/healthz`);
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error("test nats-server did not become healthy in 15 s");
    await Bun.sleep(25);
  }
  const url = `nats://127.0.0.1:${port}`;
  return {
    url,
    port,
    dir,
    proc,
    connect: () => connect({ servers: url, reconnect: false }),
    async stop() {
      proc.kill("SIGKILL");
      await proc.exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
