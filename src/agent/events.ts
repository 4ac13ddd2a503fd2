// Where the agent engine's events go (turn_started, tool_called, turn_completed,
// turn_trigger_skipped, turn.guard_breach). The engine only sees EventSink; the node
// connects it to CREWLET_EVENTS (publishEventSink), tests to a list (MemoryEventSink).
import type { Logger } from "../log.ts";
import type { PublishPort } from "./tools/estate-port.ts";
import { eventSubject } from "../queue/topics.ts";

export type EventFields = Record<string, unknown>;

export interface EmitOptions {
  /** False: published only, not logged (a streaming turn's live text is the view's, not the log's). */
  log?: boolean;
}

export interface EventSink {
  /** Never throws and never blocks a turn: observability must not break the work. */
  emit(name: string, fields: EventFields, opts?: EmitOptions): void;
}

export interface EngineEvent {
  name: string;
  fields: EventFields;
}

export class MemoryEventSink implements EventSink {
  readonly events: EngineEvent[] = [];
  emit(name: string, fields: EventFields): void {
    this.events.push({ name, fields });
  }
  named(name: string): EventFields[] {
    return this.events.filter((e) => e.name === name).map((e) => e.fields);
  }
}

/**
 * Publishes each event as JSON on `crewlet.events.{name}` (fire and forget) and logs it
 * under the same name, so the log and the stream tell one story.
 */
export function publishEventSink(queue: PublishPort, log: Logger, now: () => number): EventSink {
  return {
    emit(name, fields, opts) {
      if (opts?.log !== false) log.info(name, fields);
      const body = new TextEncoder().encode(JSON.stringify({ event: name, at: now(), ...fields }));
      queue.publish(eventSubject(name), body).catch((err: unknown) => log.warn("event_publish_failed", { name, error: (err as Error).message }));
    },
  };
}

export const nullEventSink: EventSink = { emit: () => undefined };
