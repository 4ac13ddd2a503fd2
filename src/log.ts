// Structured logging: one event name per line (seat_claimed, api_listening …) plus fields.
// Secrets never reach a line: fields whose names say they hold one are redacted here, in
// the one place every line passes through.
import { closeSync, mkdirSync, openSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { systemClock, type Clock } from "./clock.ts";

export const LEVELS = ["debug", "info", "warn", "error"] as const;
export type Level = (typeof LEVELS)[number];
export type Fields = Record<string, unknown>;

export interface LogLine {
  ts: string;
  level: Level;
  event: string;
  fields: Fields;
}

export interface Logger {
  debug(event: string, fields?: Fields): void;
  info(event: string, fields?: Fields): void;
  warn(event: string, fields?: Fields): void;
  error(event: string, fields?: Fields): void;
  /** A logger whose lines all carry `fields` (e.g. {node: "node-a"}). */
  child(fields: Fields): Logger;
}

export interface LogSink {
  write(line: LogLine): void;
  close?(): void;
}

const SECRET_FIELD = /(token|secret|password|passwd|credential|api_?key|authorization|seed)s?$/i;
const REDACTED = "[redacted]";

export function redact(value: unknown, depth = 0): unknown {
  // Bounded: a log field is never worth walking a deep or cyclic structure for.
  if (depth > 6 || value === null || typeof value !== "object") return value;
  if (value instanceof Error) return { name: value.name, message: value.message };
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  const out: Fields = {};
  for (const [k, v] of Object.entries(value as Fields)) {
    // A secret is text: counts and structures under such a name (token usage, a token's
    // grants) are walked like any other field, and their own keys judged in turn.
    const secretText = typeof v === "string" || (Array.isArray(v) && v.some((x) => typeof x === "string"));
    out[k] = SECRET_FIELD.test(k) && secretText ? REDACTED : redact(v, depth + 1);
  }
  return out;
}

class StructuredLogger implements Logger {
  constructor(
    private readonly sinks: LogSink[],
    private readonly min: number,
    private readonly base: Fields,
    private readonly clock: Clock,
  ) {}

  debug(event: string, fields?: Fields): void {
    this.emit("debug", event, fields);
  }
  info(event: string, fields?: Fields): void {
    this.emit("info", event, fields);
  }
  warn(event: string, fields?: Fields): void {
    this.emit("warn", event, fields);
  }
  error(event: string, fields?: Fields): void {
    this.emit("error", event, fields);
  }
  child(fields: Fields): Logger {
    return new StructuredLogger(this.sinks, this.min, { ...this.base, ...fields }, this.clock);
  }

  private emit(level: Level, event: string, fields?: Fields): void {
    if (LEVELS.indexOf(level) < this.min) return;
    const line: LogLine = {
      ts: new Date(this.clock.now()).toISOString(),
      level,
      event,
      fields: redact({ ...this.base, ...fields }) as Fields,
    };
    for (const sink of this.sinks) sink.write(line);
  }
}

export function formatJson(line: LogLine): string {
  return JSON.stringify({ ts: line.ts, level: line.level, event: line.event, ...line.fields });
}

export function formatText(line: LogLine): string {
  const parts = Object.entries(line.fields).map(([k, v]) => {
    const s = typeof v === "string" ? v : JSON.stringify(v);
    return `${k}=${/[\s"=]/.test(s ?? "") ? JSON.stringify(s) : s}`;
  });
  return `${line.ts} ${line.level.toUpperCase().padEnd(5)} ${line.event}${parts.length ? " " + parts.join(" ") : ""}`;
}

export function streamSink(fd: number, format: "json" | "text"): LogSink {
  const fmt = format === "json" ? formatJson : formatText;
  return { write: (line) => void writeSync(fd, fmt(line) + "\n") };
}

export function fileSink(path: string, format: "json" | "text"): LogSink {
  mkdirSync(dirname(path), { recursive: true });
  const fd = openSync(path, "a");
  return { ...streamSink(fd, format), close: () => closeSync(fd) };
}

/** Keeps lines in memory; tests read them back. */
export class MemorySink implements LogSink {
  readonly lines: LogLine[] = [];
  write(line: LogLine): void {
    this.lines.push(line);
  }
  events(name: string): LogLine[] {
    return this.lines.filter((l) => l.event === name);
  }
}

export interface LoggerOptions {
  level?: Level;
  sinks: LogSink[];
  clock?: Clock;
  fields?: Fields;
}

export function createLogger(opts: LoggerOptions): Logger {
  return new StructuredLogger(opts.sinks, LEVELS.indexOf(opts.level ?? "info"), opts.fields ?? {}, opts.clock ?? systemClock);
}

/** A logger that keeps its lines in memory, for tests. */
export function memoryLogger(level: Level = "debug", clock?: Clock): { log: Logger; sink: MemorySink } {
  const sink = new MemorySink();
  return { log: createLogger({ level, sinks: [sink], clock }), sink };
}

export const silentLogger: Logger = createLogger({ sinks: [] });
