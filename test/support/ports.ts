// Free loopback ports for test servers.
//
// Not the kernel's port 0: that hands out ports from the ephemeral range, the same range
// every outgoing connection's local port comes from, so a port found free here can be
// taken by some client's connect() before the server we start binds it (seen as a
// nats-server that exits "failed to be ready for connections"). Listeners get ports below
// the ephemeral range instead, picked at random, checked by binding, and never handed out
// twice by this process.
import { createServer } from "node:net";
import { readFileSync } from "node:fs";

/** Below Linux's default ephemeral range (32768–60999) and above the well-known ports. */
const LOW = 20_000;
const DEFAULT_EPHEMERAL_START = 32_768;
/** Bounded: a crowded range fails loudly rather than spinning. */
const ATTEMPTS = 200;

const handedOut = new Set<number>();

function ephemeralStart(): number {
  try {
    const [start] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number);
    return start && start > LOW + 1_000 ? start : DEFAULT_EPHEMERAL_START;
  } catch {
    return DEFAULT_EPHEMERAL_START;
  }
}

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

export async function freePort(): Promise<number> {
  const high = ephemeralStart();
  for (let i = 0; i < ATTEMPTS; i++) {
    const port = LOW + Math.floor(Math.random() * (high - LOW));
    if (handedOut.has(port)) continue;
    if (await canBind(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free loopback port in ${LOW}–${high} after ${ATTEMPTS} tries`);
}
