// The org model: a Company (validated config) becomes seats with identities, units with
// their parents and children, reporting lines and placement groups. Pure: company in, org
// out. Every node builds the same org from the same company revision, which is what lets
// routing be derived from the org rather than from whichever agents this process runs
// (spec: Seat Ownership § "Routing is org-derived, never instance-derived").
import { v5 as uuidv5 } from "uuid";
import { handleFromName, type Company, type Placement, type Role, type Unit } from "../config/company.ts";
import { placementKey } from "../seat/placement.ts";

/**
 * The uuid v5 namespace agent ids are minted in. Fixed forever: changing it would give
 * every agent of every company a new identity (its memory, its episodes, its ledger keys).
 * Derived once as uuidv5("https://crewlet.dev/ns/agent", uuid.URL namespace) and written
 * out as a literal so the id never depends on a library's constant; test/org holds the two
 * together.
 */
export const AGENT_ID_NAMESPACE = "3339134e-c331-5a9d-86ac-fc1d23212abb";

/** An agent's stable id: uuid v5 over "{company name}:{handle}". Same on every node. */
export function agentIdFor(company_name: string, handle: string): string {
  return uuidv5(`${company_name}:${handle}`, AGENT_ID_NAMESPACE);
}

export type SeatKind = "agent" | "human";
export type McpServerConfig = Role["mcp_servers"][string];

export interface Seat {
  handle: string;
  name: string;
  kind: SeatKind;
  goal: string;
  backstory: string;
  /** Provider key under providers.llm (the role's own, else the company's default_llm). */
  llm: string | undefined;
  mcp_servers: Readonly<Record<string, McpServerConfig>>;
  placement: Placement;
  /** Agent seats only: uuid v5 over "{company}:{handle}". */
  agent_id: string | null;
  manager: string | null;
  reports: readonly string[];
  /** Ids of the units the seat belongs to (listed in roles, or leads), outermost first. */
  units: readonly string[];
}

export interface OrgUnit {
  id: string;
  name: string;
  lead: string | null;
  project: string | null;
  space: string | null;
  channel: string | null;
  roles: readonly string[];
  parent: string | null;
  children: readonly string[];
}

export type Relation = "manager" | "report" | "unit" | "company";

export interface Colleague {
  handle: string;
  name: string;
  kind: SeatKind;
  goal: string;
  /** The closest tie: manager, report, shares a unit, or just the same company. */
  relation: Relation;
}

export interface PlacementGroup {
  /** placementKey(placement): seats with the same placement share a group. */
  key: string;
  placement: Placement;
  seats: readonly string[];
}

export interface Org {
  readonly company_name: string;
  readonly mission: string;
  readonly timezone: string;
  readonly policies: readonly string[];
  /** In the company file's order. */
  readonly seats: readonly Seat[];
  readonly units: readonly OrgUnit[];
  seat(handle: string): Seat | undefined;
  /** The seat, if it is an agent seat (humans are never woken or placed). */
  agentSeat(handle: string): Seat | undefined;
  unit(id: string): OrgUnit | undefined;
  agentSeats(): Seat[];
  /** Every other seat, closest ties first (manager, reports, unit peers, the rest). */
  colleaguesOf(handle: string): Colleague[];
  placementGroups(): PlacementGroup[];
}

export function buildOrg(company: Company): Org {
  const roles = company.roles;
  const managerOf = new Map<string, string>();
  for (const r of roles) for (const m of r.manages) managerOf.set(m, r.handle);

  const units: OrgUnit[] = [];
  const unitsOfSeat = new Map<string, string[]>();
  const addUnitOf = (handle: string, id: string) => {
    const list = unitsOfSeat.get(handle) ?? [];
    if (!list.includes(id)) list.push(id);
    unitsOfSeat.set(handle, list);
  };
  // Bounded by the company file: each unit is visited once, depth-first in file order.
  const walk = (list: readonly Unit[], parent: string | null): string[] =>
    list.map((u) => {
      const id = u.id ?? handleFromName(u.name);
      const children: string[] = [];
      const unit: OrgUnit = {
        id,
        name: u.name,
        lead: u.lead ?? null,
        project: u.project ?? null,
        space: u.space ?? null,
        channel: u.channel ?? null,
        roles: [...(u.roles ?? [])],
        parent,
        children,
      };
      units.push(unit);
      for (const h of unit.roles) addUnitOf(h, id);
      if (unit.lead !== null) addUnitOf(unit.lead, id);
      children.push(...walk(u.units ?? [], id));
      return id;
    });
  walk(company.units, null);

  const seats: Seat[] = roles.map((r) => ({
    handle: r.handle,
    name: r.name,
    kind: r.kind,
    goal: r.goal,
    backstory: r.backstory,
    llm: r.llm ?? company.default_llm,
    mcp_servers: r.mcp_servers,
    placement: r.placement,
    agent_id: r.kind === "agent" ? agentIdFor(company.name, r.handle) : null,
    manager: managerOf.get(r.handle) ?? null,
    reports: [...r.manages],
    units: unitsOfSeat.get(r.handle) ?? [],
  }));
  const byHandle = new Map(seats.map((s) => [s.handle, s]));
  const byUnit = new Map(units.map((u) => [u.id, u]));

  const relationOf = (me: Seat, other: Seat): Relation => {
    if (me.manager === other.handle) return "manager";
    if (me.reports.includes(other.handle)) return "report";
    if (me.units.some((u) => other.units.includes(u))) return "unit";
    return "company";
  };
  const RANK: Record<Relation, number> = { manager: 0, report: 1, unit: 2, company: 3 };

  return {
    company_name: company.name,
    mission: company.mission,
    timezone: company.timezone,
    policies: company.policies,
    seats,
    units,
    seat: (h) => byHandle.get(h),
    agentSeat: (h) => {
      const s = byHandle.get(h);
      return s?.kind === "agent" ? s : undefined;
    },
    unit: (id) => byUnit.get(id),
    agentSeats: () => seats.filter((s) => s.kind === "agent"),
    colleaguesOf: (handle) => {
      const me = byHandle.get(handle);
      if (!me) return [];
      return seats
        .filter((s) => s.handle !== handle)
        .map((s, i) => ({ c: { handle: s.handle, name: s.name, kind: s.kind, goal: s.goal, relation: relationOf(me, s) }, i }))
        .sort((a, b) => RANK[a.c.relation] - RANK[b.c.relation] || a.i - b.i)
        .map((x) => x.c);
    },
    placementGroups: () => {
      const groups = new Map<string, { key: string; placement: Placement; seats: string[] }>();
      for (const s of seats) {
        if (s.kind !== "agent") continue;
        const key = placementKey(s.placement);
        const g = groups.get(key) ?? { key, placement: s.placement, seats: [] };
        g.seats.push(s.handle);
        groups.set(key, g);
      }
      return [...groups.values()];
    },
  };
}
