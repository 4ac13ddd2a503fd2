// nats-server's own log lines, parsed so each becomes one `nats_log` line in ours at the
// level nats-server gave it. Pure: text in, structured line out.
import type { Level } from "../log.ts";

export interface NatsLogLine {
  level: Level;
  msg: string;
}

// nats-server tags: DBG, TRC, INF, WRN, ERR, FTL. A fatal line is followed by exit, which
// the sidecar reports on its own; here it is an error like any other.
// Its informational lines (a 30-line banner at every boot, route chatter) go to debug: the
// node's own lines (nats_sidecar_ready, nats_sidecar_died …) say what an operator needs,
// and nats-server's warnings and errors still come through at their level.
const LEVELS: Record<string, Level> = {
  TRC: "debug",
  DBG: "debug",
  INF: "debug",
  WRN: "warn",
  ERR: "error",
  FTL: "error",
};

/**
 * nats-server warns about plaintext passwords at every boot. Ours are a per-boot secret
 * and digests of the operator's secrets, in a 0600 file under the store dir; a warning an
 * operator sees on every start and can do nothing about teaches them to ignore warnings.
 */
const EXPECTED_NOISE = /^Plaintext passwords detected/;

/** "[1234] [INF] msg" (logtime off) or "[1234] 2026/01/01 00:00:00.000000 [INF] msg". */
const LINE = /^\[\d+\]\s+(?:\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d\.\d+\s+)?\[([A-Z]{3})\]\s?(.*)$/;

export function parseNatsLogLine(raw: string): NatsLogLine | null {
  const text = raw.replace(/\r$/, "");
  if (text.trim() === "") return null;
  const m = LINE.exec(text);
  if (!m) return { level: "info", msg: text };
  const msg = m[2] ?? "";
  const level = LEVELS[m[1]!] ?? "info";
  return { level: EXPECTED_NOISE.test(msg) ? "debug" : level, msg };
}

/** The server's ID, printed once at start ("  ID:  NABC…"), ties /varz answers to our child. */
export function serverIdFrom(msg: string): string | null {
  const m = /^\s*ID:\s+(N[A-Z0-9]{55})\s*$/.exec(msg);
  return m ? m[1]! : null;
}
