// Routing: handle → (inbox subject, agent id), derived from the org every node holds in
// full, never from the agents this process happens to run. A miss here means "no such
// agent seat in the company"; "not running on this node" is a different question that
// routing never asks (spec: Seat Ownership § "Routing is org-derived").
import { mailbox } from "../queue/topics.ts";
import type { Org } from "./org.ts";

export interface Route {
  handle: string;
  agent_id: string;
  /** `crewlet.seats.{shard}.{handle}.inbox` */
  subject: string;
  /** `agent-{handle}` */
  group: string;
}

export type RouteResult = { ok: true; route: Route } | { ok: false; reason: "unknown_seat" | "human_seat" };

export function routeFor(org: Org, handle: string): RouteResult {
  const seat = org.seat(handle.replace(/^@/, ""));
  if (!seat) return { ok: false, reason: "unknown_seat" };
  if (seat.kind !== "agent" || seat.agent_id === null) return { ok: false, reason: "human_seat" };
  const { subject, group } = mailbox(seat.handle, "inbox");
  return { ok: true, route: { handle: seat.handle, agent_id: seat.agent_id, subject, group } };
}
