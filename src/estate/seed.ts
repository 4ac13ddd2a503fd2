// What the company's org chart puts in the estate: a project per unit that names one (plus
// a default), a knowledge container per unit space (plus a company-wide one), a channel per
// unit (plus `general`). Seeding is an ordinary write through the state log, so every data
// node holds the same rows; its op id is derived from the content, so every node booting on
// the same company appends the same record and the log and ledger keep one.
import { createHash } from "node:crypto";
import { handleFromName, type Company, type Unit } from "../config/company.ts";
import { makeRecord, type BodyOf, type StateRecord } from "./records.ts";
import type { Domain } from "./schema.ts";

/** The project work lands in when no unit's project fits. */
export const DEFAULT_PROJECT_KEY = "GEN";
/** The knowledge container the whole company shares. */
export const COMPANY_CONTAINER_KEY = "company";
/** The company-wide channel. */
export const GENERAL_CHANNEL_ID = "general";

interface FlatUnit {
  id: string;
  unit: Unit;
}

function flatten(units: readonly Unit[], out: FlatUnit[] = []): FlatUnit[] {
  for (const u of units) {
    out.push({ id: u.id ?? handleFromName(u.name), unit: u });
    flatten(u.units ?? [], out);
  }
  return out;
}

type Seed<D extends Domain> = Extract<BodyOf<D>, { op: `${string}.seed` }>;

export function seedBodies(company: Company): { tracker: Seed<"tracker">; pages: Seed<"pages">; chat: Seed<"chat"> } {
  const units = flatten(company.units);
  const projects = new Map<string, { key: string; name: string; unit_id: string | null }>();
  const containers = new Map<string, { key: string; name: string; unit_id: string | null }>();
  const channels = new Map<string, { id: string; kind: "unit" | "general"; name: string; unit_id: string | null }>();
  for (const { id, unit } of units) {
    if (unit.project && !projects.has(unit.project)) projects.set(unit.project, { key: unit.project, name: unit.name, unit_id: id });
    if (unit.space && !containers.has(unit.space)) containers.set(unit.space, { key: unit.space, name: unit.name, unit_id: id });
    const channel = unit.channel ?? id;
    if (channel !== GENERAL_CHANNEL_ID && !channels.has(channel)) channels.set(channel, { id: channel, kind: "unit", name: unit.name, unit_id: id });
  }
  if (!projects.has(DEFAULT_PROJECT_KEY)) projects.set(DEFAULT_PROJECT_KEY, { key: DEFAULT_PROJECT_KEY, name: company.name, unit_id: null });
  if (!containers.has(COMPANY_CONTAINER_KEY)) containers.set(COMPANY_CONTAINER_KEY, { key: COMPANY_CONTAINER_KEY, name: company.name, unit_id: null });
  channels.set(GENERAL_CHANNEL_ID, { id: GENERAL_CHANNEL_ID, kind: "general", name: "general", unit_id: null });
  const sorted = <T>(m: Map<string, T>) => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);
  return {
    tracker: { op: "tracker.seed", projects: sorted(projects) },
    pages: { op: "pages.seed", containers: sorted(containers) },
    chat: { op: "chat.seed", channels: sorted(channels) },
  };
}

function seedOpId(domain: Domain, body: unknown): string {
  return `seed-${domain}-${createHash("sha256").update(JSON.stringify(body)).digest("hex").slice(0, 32)}`;
}

/**
 * The three seed records. Their time is fixed (0) rather than the booting node's clock:
 * two nodes seeding the same company must build the same rows under the same op id.
 */
export function seedRecords(company: Company, origin: string): StateRecord[] {
  const b = seedBodies(company);
  return [
    makeRecord("tracker", b.tracker, 0, origin, seedOpId("tracker", b.tracker)),
    makeRecord("pages", b.pages, 0, origin, seedOpId("pages", b.pages)),
    makeRecord("chat", b.chat, 0, origin, seedOpId("chat", b.chat)),
  ];
}
