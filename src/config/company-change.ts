// A company change an agent proposes: a hire (a new seat, in a unit, under a manager) or a
// changed goal (the company's mission or one seat's goal). Applying one is pure: the
// active company in, the next company out — judged by the same schema every company file
// and revision is, so a proposal that would make a bad company is refused naming its field.
import { z } from "zod";
import { companySchema, HANDLE_RE, handleFromName, type Company, type Unit } from "./company.ts";

const words = (max: number) => z.string().trim().min(1).max(max);

export const companyChangeSchema = z.discriminatedUnion("kind", [
  z.strictObject({
    kind: z.literal("hire"),
    name: words(80).describe("The new seat's role name, e.g. Designer"),
    handle: z.string().regex(HANDLE_RE, "handles are lower-case letters, digits, _ and -").optional().describe("Defaults from the name"),
    goal: words(2_000),
    backstory: z.string().max(4_000).default(""),
    llm: z.string().min(1).optional().describe("A provider key under providers.llm; default: the company's"),
    unit: z.string().min(1).optional().describe("The id of the unit the seat joins"),
    manager: z.string().regex(HANDLE_RE).optional().describe("The handle of the seat it reports to"),
  }),
  z.strictObject({
    kind: z.literal("goal"),
    target: z.string().min(1).describe('"company" for the mission, or a seat handle'),
    goal: words(2_000),
  }),
]);
export type CompanyChange = z.output<typeof companyChangeSchema>;

export type ChangeOutcome = { ok: true; company: Company; summary: string } | { ok: false; error: string };

/** The company after `change`, validated in full. Pure. */
export function applyCompanyChange(current: Company, change: CompanyChange): ChangeOutcome {
  const next = structuredClone(current) as Company & { units: Unit[] };
  let summary: string;
  if (change.kind === "hire") {
    const role = { name: change.name, goal: change.goal, backstory: change.backstory, ...(change.handle ? { handle: change.handle } : {}), ...(change.llm ? { llm: change.llm } : {}) };
    next.roles = [...next.roles, role as Company["roles"][number]];
    const handle = change.handle ?? null;
    if (change.unit !== undefined) {
      const unit = findUnit(next.units, change.unit);
      if (!unit) return { ok: false, error: `unit: no unit "${change.unit}"` };
      unit.roles = [...(unit.roles ?? []), handle ?? handleFromName(change.name)];
    }
    if (change.manager !== undefined) {
      const m = next.roles.find((r) => r.handle === change.manager);
      if (!m) return { ok: false, error: `manager: no seat "${change.manager}"` };
      m.manages = [...m.manages, handle ?? handleFromName(change.name)];
    }
    summary = `hire ${change.name}${change.unit ? ` in ${change.unit}` : ""}${change.manager ? ` under @${change.manager}` : ""}`;
  } else if (change.target === "company") {
    next.mission = change.goal;
    summary = "change the company's mission";
  } else {
    const r = next.roles.find((x) => x.handle === change.target);
    if (!r) return { ok: false, error: `target: no seat "${change.target}"` };
    r.goal = change.goal;
    summary = `change @${change.target}'s goal`;
  }
  const parsed = companySchema.safeParse(next);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, error: `${issue?.path.join(".") || "company"}: ${issue?.message ?? "invalid"}` };
  }
  return { ok: true, company: parsed.data, summary };
}

function findUnit(units: Unit[], id: string): Unit | null {
  for (const u of units) {
    if ((u.id ?? handleFromName(u.name)) === id) return u;
    const inner = findUnit(u.units ?? [], id);
    if (inner) return inner;
  }
  return null;
}

