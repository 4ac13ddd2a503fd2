// Which seats a normalized event wakes. Pure: the integration's routes, the event and the
// org in; seats out, each with why. A route matches when every condition it names holds
// (event and action, repository, label, Slack channel) and wakes its seat or its unit's
// lead; an `@handle` of an agent seat in the body wakes that seat too (unless the
// integration turned mentions off). Persons are never woken.
import type { Org } from "../org/org.ts";
import type { IntegrationConfig, IntegrationRoute } from "../config/integrations.ts";
import type { NormalizedEvent } from "./event.ts";

export interface RoutedSeat {
  seat: string;
  /** `routes[2]` or `mention`. */
  why: string;
}

/** A route's `events` entry matches `issues.opened` as itself or as the bare `issues`. */
export function eventMatches(events: readonly string[], event: string): boolean {
  if (events.length === 0) return true;
  const bare = event.split(".")[0]!;
  return events.some((e) => e === event || e === bare);
}

export function routeMatches(r: IntegrationRoute, ev: NormalizedEvent): boolean {
  if (!eventMatches(r.events, ev.event)) return false;
  if (r.repository !== undefined && (ev.repository ?? "").toLowerCase() !== r.repository.toLowerCase()) return false;
  if (r.label !== undefined && !ev.labels.some((l) => l.toLowerCase() === r.label!.toLowerCase())) return false;
  if (r.channel !== undefined && ev.channel !== r.channel) return false;
  return true;
}

export function routeEvent(integ: Pick<IntegrationConfig, "routes" | "mentions">, ev: NormalizedEvent, org: Pick<Org, "agentSeat" | "unit">): RoutedSeat[] {
  const out: RoutedSeat[] = [];
  const add = (seat: string | null | undefined, why: string) => {
    if (!seat || !org.agentSeat(seat)) return;
    if (out.some((x) => x.seat === seat)) return;
    out.push({ seat, why });
  };
  integ.routes.forEach((r, i) => {
    if (!routeMatches(r, ev)) return;
    if (r.seat !== undefined) add(r.seat, `routes[${i}]`);
    else if (r.unit !== undefined) add(org.unit(r.unit)?.lead, `routes[${i}]`);
  });
  if (integ.mentions) for (const h of ev.mentions) add(h, "mention");
  return out;
}

/** The seats an integration can ever wake by its routes (its outbound tools are theirs). */
export function routedSeats(integ: Pick<IntegrationConfig, "routes">, org: Pick<Org, "agentSeat" | "unit">): string[] {
  const out: string[] = [];
  for (const r of integ.routes) {
    const seat = r.seat ?? (r.unit !== undefined ? org.unit(r.unit)?.lead ?? undefined : undefined);
    if (seat && org.agentSeat(seat) && !out.includes(seat)) out.push(seat);
  }
  return out;
}
