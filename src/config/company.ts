// The company: an org chart in YAML. Roles become seats (agent seats are what the fleet
// places), units group them and own a project, a knowledge space and a channel.
// Cross-references (manages, lead, unit roles) are checked here so a bad file is refused
// at load with the field named, never discovered by a seat at runtime.
import { approvalReferenceProblems, approvalsSchema } from "./approvals.ts";
import { z } from "zod";
import { patternProblem } from "./pattern.ts";
import { checkIntegrations, integrationsSchema } from "./integrations.ts";
import { scheduleSchema, validTimeZone } from "./schedules.ts";
import { budgetsSchema, checkBudgets, pricingSchema } from "./budgets.ts";
import { todaySchema } from "./today.ts";
import { embeddingsSchema } from "./embeddings.ts";
import { skillsSchema } from "./skills.ts";
import { roleSandboxSchema, sandboxProviderSchema, sandboxReferenceProblems } from "./sandbox.ts";

export const HANDLE_RE = /^[a-z0-9][a-z0-9_\-]{0,47}$/;
/**
 * A seat's control and reflect groups are `agent-{handle}-control` / `-reflect`: a handle
 * ending that way would name another seat's group, and one durable name cannot be two
 * mailboxes.
 */
export const RESERVED_HANDLE_SUFFIX = /-(control|reflect)$/;
const handle = z
  .string()
  .regex(HANDLE_RE, "handles are lower-case letters, digits, _ and -, at most 48 chars")
  .refine((h) => !RESERVED_HANDLE_SUFFIX.test(h), "a handle may not end in -control or -reflect (those name a seat's other mailboxes)");

/** Derives a handle from a role name: "Chief Technology Officer" → "chief-technology-officer". */
export function handleFromName(name: string): string {
  return name
    .toLowerCase()
    .normalize("NFKD")
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 48);
}

const secretish = z.string().min(1);

/** How a model call is made and given up on (defaults and their reasons: src/agent/providers/http.ts). */
const callSettings = {
  timeout_seconds: z.number().min(1).max(600).default(120).describe("Overall bound on one model call"),
  connect_timeout_seconds: z.number().min(0.1).max(120).optional().describe("TCP connect bound (default 10)"),
  first_byte_timeout_seconds: z.number().min(0.1).max(600).optional().describe("Bound on the wait for the answer to start (default 30 streamed, 90 not)"),
  idle_timeout_seconds: z.number().min(0.1).max(600).optional().describe("Longest silence between chunks of an answer (default 30)"),
  retry_budget_seconds: z.number().min(0).max(3600).default(120).describe("Time one turn may spend retrying transient failures"),
  stream: z.boolean().default(false).describe("Ask for server-sent events; the live Events view shows text as it arrives"),
};

const openaiProvider = z.strictObject({
  type: z.literal("openai"),
  base_url: z.string().url().default("https://api.openai.com/v1"),
  model: z.string().min(1),
  api_keys: z.array(secretish).default([]),
  ...callSettings,
  fallback: z.string().optional().describe("Another provider key to use when this one fails"),
  pricing: pricingSchema.optional().describe("Price per million input/output tokens: budgets read in money"),
});

const anthropicProvider = z.strictObject({
  type: z.literal("anthropic"),
  base_url: z.string().url().default("https://api.anthropic.com"),
  model: z.string().min(1),
  api_keys: z.array(secretish).min(1),
  ...callSettings,
  max_tokens: z.number().int().min(1).default(4096),
  fallback: z.string().optional(),
  pricing: pricingSchema.optional().describe("Price per million input/output tokens: budgets read in money"),
});

const scriptedRule = z.strictObject({
  when: z
    .strictObject({
      trigger: z.string().optional().describe("Trigger type, e.g. external_notification, task_assigned"),
      text: z
        .string()
        .superRefine((source, ctx) => {
          const problem = patternProblem(source);
          if (problem !== null) ctx.addIssue({ code: "custom", message: `not a valid regular expression: ${problem}` });
        })
        .optional()
        .describe("A regular expression the trigger's text must match"),
      seat: handle.optional(),
    })
    .default({}),
  tool_calls: z
    .array(z.strictObject({ tool: z.string().min(1), args: z.record(z.string(), z.unknown()).default({}) }))
    .default([]),
  reply: z.string().default(""),
});

const scriptedProvider = z.strictObject({
  type: z.literal("scripted"),
  rules: z.array(scriptedRule).default([]),
});

export const providerSchema = z.discriminatedUnion("type", [openaiProvider, anthropicProvider, scriptedProvider]);
export type ProviderConfig = z.infer<typeof providerSchema>;

export const mcpServerSchema = z.strictObject({
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  env: z.record(z.string(), z.string()).default({}),
});

export const placementSchema = z.strictObject({
  labels: z.record(z.string(), z.string()).default({}),
  node: z.string().optional().describe("Pin the seat to one node id"),
});
export type Placement = z.infer<typeof placementSchema>;

export const roleSchema = z.strictObject({
  name: z.string().min(1),
  handle: handle.optional(),
  kind: z.enum(["agent", "human"]).default("agent"),
  goal: z.string().default(""),
  backstory: z.string().default(""),
  manages: z.array(handle).default([]),
  llm: z.string().optional().describe("Provider key under providers.llm"),
  mcp_servers: z.record(z.string(), mcpServerSchema).default({}),
  placement: placementSchema.default({ labels: {} }),
  sandbox: roleSandboxSchema.optional().describe("This seat may start coding runs (providers.sandbox)"),
});

interface UnitInput {
  name: string;
  id?: string;
  lead?: string;
  project?: string;
  space?: string;
  channel?: string;
  roles?: string[];
  units?: UnitInput[];
}

export const unitSchema: z.ZodType<UnitInput> = z.lazy(() =>
  z.strictObject({
    name: z.string().min(1),
    id: z.string().regex(/^[a-z0-9][a-z0-9_\-]*$/).optional(),
    lead: handle.optional(),
    project: z.string().regex(/^[A-Z][A-Z0-9]{1,9}$/, "project keys are 2–10 upper-case letters/digits, e.g. ENG").optional(),
    space: z.string().min(1).optional(),
    channel: z.string().regex(/^[a-z0-9][a-z0-9_\-]*$/).optional(),
    roles: z.array(handle).default([]),
    units: z.array(unitSchema).default([]),
  }),
) as z.ZodType<UnitInput>;

const companyShape = z.strictObject({
  name: z.string().min(1),
  mission: z.string().default(""),
  timezone: z.string().default("UTC"),
  policies: z.array(z.string()).default([]),
  providers: z
    .strictObject({
      llm: z.record(z.string(), providerSchema).default({}),
      sandbox: sandboxProviderSchema.optional().describe("Where seats' coding runs happen (run_sandbox)"),
      embeddings: embeddingsSchema,
    })
    .default({ llm: {} }),
  default_llm: z.string().optional(),
  roles: z.array(roleSchema).default([]),
  units: z.array(unitSchema).default([]),
  /** Signed webhooks in and their routes to seats (src/integrations/). */
  integrations: integrationsSchema,
  schedules: z.array(scheduleSchema).default([]).describe("Seats woken on a cron, each tick fired once fleet-wide"),
  /** Caps on model spend per window (src/config/budgets.ts, src/spend/). */
  budgets: budgetsSchema,
  /** What the dashboard's Today view calls stuck (src/config/today.ts). */
  today: todaySchema,
  /** What needs a person's yes before it happens (src/config/approvals.ts, src/approvals/). */
  approvals: approvalsSchema,
  /** Where tool skills come from (src/config/skills.ts, src/agent/tool-skills.ts). */
  skills: skillsSchema,
});

export const companySchema = companyShape.transform((c, ctx) => {
  const roles = c.roles.map((r, i) => {
    const h = r.handle ?? handleFromName(r.name);
    if (!HANDLE_RE.test(h) || RESERVED_HANDLE_SUFFIX.test(h)) {
      ctx.addIssue({ code: "custom", path: ["roles", i, "handle"], message: `cannot derive a handle from name "${r.name}"; set handle` });
    }
    return { ...r, handle: h };
  });
  checkReferences({ ...c, roles }, ctx);
  return { ...c, roles };
});

export type Company = z.output<typeof companySchema>;
export type Role = Company["roles"][number];
export type Unit = UnitInput;

type ShapeOut = z.output<typeof companyShape>;
type HandledRole = ShapeOut["roles"][number] & { handle: string };

function checkReferences(c: Omit<ShapeOut, "roles"> & { roles: HandledRole[] }, ctx: z.RefinementCtx): void {
  const index = new Map<string, number>();
  c.roles.forEach((r, i) => {
    if (index.has(r.handle)) {
      ctx.addIssue({ code: "custom", path: ["roles", i, "handle"], message: `duplicate handle "${r.handle}" (also roles[${index.get(r.handle)}])` });
    } else index.set(r.handle, i);
  });
  for (const p of sandboxReferenceProblems(c.providers.sandbox, c.roles)) ctx.addIssue({ code: "custom", ...p });
  for (const p of approvalReferenceProblems(c.approvals, new Set(index.keys()), unitIdsOf(c.units))) ctx.addIssue({ code: "custom", ...p });
  const providers = c.providers.llm;
  if (c.default_llm !== undefined && !(c.default_llm in providers)) {
    ctx.addIssue({ code: "custom", path: ["default_llm"], message: `unknown provider "${c.default_llm}"` });
  }
  for (const [key, p] of Object.entries(providers)) {
    if ((p.type === "openai" || p.type === "anthropic") && p.fallback !== undefined && !(p.fallback in providers)) {
      ctx.addIssue({ code: "custom", path: ["providers", "llm", key, "fallback"], message: `unknown provider "${p.fallback}"` });
    }
  }
  c.roles.forEach((r, i) => {
    r.manages.forEach((m, j) => {
      if (!index.has(m)) ctx.addIssue({ code: "custom", path: ["roles", i, "manages", j], message: `unknown handle "${m}"` });
      if (m === r.handle) ctx.addIssue({ code: "custom", path: ["roles", i, "manages", j], message: "a role cannot manage itself" });
    });
    if (r.llm !== undefined && !(r.llm in providers)) {
      ctx.addIssue({ code: "custom", path: ["roles", i, "llm"], message: `unknown provider "${r.llm}"` });
    }
  });
  // A role managed by two managers, or a loop of managers, has no reporting line.
  const managerOf = new Map<string, string>();
  c.roles.forEach((r, i) =>
    r.manages.forEach((m, j) => {
      const prev = managerOf.get(m);
      if (prev !== undefined && prev !== r.handle) {
        ctx.addIssue({ code: "custom", path: ["roles", i, "manages", j], message: `"${m}" is already managed by "${prev}"` });
      } else managerOf.set(m, r.handle);
    }),
  );
  for (const start of managerOf.keys()) {
    const seen = new Set<string>([start]);
    let at = managerOf.get(start);
    while (at !== undefined) {
      if (seen.has(at)) {
        ctx.addIssue({ code: "custom", path: ["roles", index.get(start) ?? 0, "handle"], message: `reporting lines form a cycle through "${start}"` });
        break;
      }
      seen.add(at);
      at = managerOf.get(at);
    }
  }
  if (!validTimeZone(c.timezone)) {
    ctx.addIssue({ code: "custom", path: ["timezone"], message: `unknown time zone "${c.timezone}" (want an IANA name such as Europe/Paris)` });
  }
  const scheduleIds = new Map<string, number>();
  c.schedules.forEach((s, i) => {
    if (scheduleIds.has(s.id)) ctx.addIssue({ code: "custom", path: ["schedules", i, "id"], message: `duplicate schedule id "${s.id}" (also schedules[${scheduleIds.get(s.id)}])` });
    else scheduleIds.set(s.id, i);
    const role = index.has(s.seat) ? c.roles[index.get(s.seat)!] : undefined;
    if (!role) ctx.addIssue({ code: "custom", path: ["schedules", i, "seat"], message: `unknown handle "${s.seat}"` });
    else if (role.kind !== "agent") ctx.addIssue({ code: "custom", path: ["schedules", i, "seat"], message: `"${s.seat}" is a human seat; a schedule wakes an agent` });
  });
  const unitIds = new Set<string>();
  const walk = (units: UnitInput[], path: (string | number)[]) => {
    units.forEach((u, i) => {
      const p = [...path, i];
      const id = u.id ?? handleFromName(u.name);
      if (unitIds.has(id)) ctx.addIssue({ code: "custom", path: [...p, "id"], message: `duplicate unit id "${id}"` });
      unitIds.add(id);
      if (u.lead !== undefined && !index.has(u.lead)) ctx.addIssue({ code: "custom", path: [...p, "lead"], message: `unknown handle "${u.lead}"` });
      (u.roles ?? []).forEach((h, j) => {
        if (!index.has(h)) ctx.addIssue({ code: "custom", path: [...p, "roles", j], message: `unknown handle "${h}"` });
      });
      walk(u.units ?? [], [...p, "units"]);
    });
  };
  walk(c.units, ["units"]);
  const leads = new Map<string, string | null>();
  const collect = (units: UnitInput[]): void => {
    for (const u of units) {
      leads.set(u.id ?? handleFromName(u.name), u.lead ?? null);
      collect(u.units ?? []);
    }
  };
  collect(c.units);
  checkBudgets(c.budgets, (h) => c.roles[index.get(h) ?? -1]?.kind ?? null, ctx);
  checkIntegrations(c.integrations, { seatKind: (h) => c.roles[index.get(h) ?? -1]?.kind ?? null, unitLead: (id) => leads.get(id) }, ctx);
}

/** The seats the fleet places: agent roles only (a person is never woken or placed). */
/** `spawns`: the MCP servers its acquire starts, which the claim ramp charges (placement.ts). */
export function agentSeats(c: Company): { handle: string; placement: Placement; spawns: number }[] {
  return c.roles.filter((r) => r.kind === "agent").map((r) => ({ handle: r.handle, placement: r.placement, spawns: Object.keys(r.mcp_servers).length }));
}

/** Every unit's id, however deep. */
function unitIdsOf(units: readonly UnitInput[]): Set<string> {
  const out = new Set<string>();
  const walk = (list: readonly UnitInput[]) => {
    for (const u of list) {
      out.add(u.id ?? handleFromName(u.name));
      walk(u.units ?? []);
    }
  };
  walk(units);
  return out;
}
