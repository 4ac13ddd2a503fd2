// `company.integrations`: the signed webhooks the company listens to and the routes that
// turn their events into wakes. Only zod here (the company schema embeds it); the
// cross-references to seats and units are checked by checkIntegrations, which the company
// schema calls with its own index so a route naming an unknown seat is refused at load
// naming the field.
import { z } from "zod";

export const INTEGRATION_KINDS = ["github", "slack", "generic"] as const;
export type IntegrationKind = (typeof INTEGRATION_KINDS)[number];

/**
 * A signing secret shorter than this is guessable offline from one signed delivery: 16
 * bytes (128 bits) is the floor GitHub's and Slack's own generated secrets clear.
 */
export const MIN_SECRET_BYTES = 16;

/**
 * Notifications one seat is woken by per minute before the rest are coalesced. Ten a
 * minute is a busy repository's comment thread read as it happens; past that a person
 * would rather get one summary than ten more turns, and every turn is a model bill.
 */
export const DEFAULT_RATE_PER_MINUTE = 10;
/** A rate above this is no valve at all: a seat cannot sensibly take a turn a second. */
export const MAX_RATE_PER_MINUTE = 600;

/** The REST endpoints a kind's outbound tools call unless base_url says otherwise. */
export const DEFAULT_BASE_URLS: Record<IntegrationKind, string | null> = {
  github: "https://api.github.com",
  slack: "https://slack.com/api",
  generic: null,
};

const ID_RE = /^[a-z0-9][a-z0-9_\-]{0,47}$/;
const HANDLE_RE = /^[a-z0-9][a-z0-9_\-]{0,47}$/;

const secret = z
  .string()
  .refine((s) => Buffer.byteLength(s, "utf8") >= MIN_SECRET_BYTES, `is shorter than ${MIN_SECRET_BYTES} bytes; use a long random secret`);

/** GitHub: `issues.opened`, or `issues` for every action of that event. Slack: `message`, `app_mention`. */
const eventName = z.string().regex(/^[a-z_]+(\.[a-z_]+)?$/, "events are `event` or `event.action`, e.g. issues.opened");

export const routeSchema = z
  .strictObject({
    /** Wake this seat… */
    seat: z.string().regex(HANDLE_RE, "seat handles are lower-case letters, digits, _ and -").optional(),
    /** …or this unit's lead. */
    unit: z.string().min(1).optional(),
    /** Event names (`issues.opened`, `issue_comment`, `message`); empty = every event. */
    events: z.array(eventName).default([]),
    /** GitHub: `owner/name`. */
    repository: z.string().regex(/^[A-Za-z0-9_.\-]+\/[A-Za-z0-9_.\-]+$/, "repository is owner/name").optional(),
    /** GitHub: the issue or pull request carries this label (or the event added it). */
    label: z.string().min(1).optional(),
    /** Slack: the channel id (C…, G…) the message was posted in. */
    channel: z.string().min(1).optional(),
  })
  .refine((r) => (r.seat === undefined) !== (r.unit === undefined), "a route names exactly one of seat or unit");
export type IntegrationRoute = z.output<typeof routeSchema>;

export const integrationSchema = z.strictObject({
  id: z.string().regex(ID_RE, "integration ids are lower-case letters, digits, _ and -, at most 48 chars"),
  kind: z.enum(INTEGRATION_KINDS),
  /** The signing secret: GitHub's webhook secret, Slack's signing secret, the generic HMAC key. */
  secret,
  /** The REST token the outbound tools use (none: the integration is inbound only). */
  token: z.string().min(1).optional(),
  /** REST base for the outbound tools (GitHub Enterprise: https://host/api/v3). */
  base_url: z.string().url().optional(),
  /** Generic: the header carrying the hex HMAC-SHA256 of the body (`sha256=` prefix allowed). */
  signature_header: z.string().regex(/^[A-Za-z0-9\-]+$/).default("X-Signature-256"),
  /** Generic: the header naming the delivery; absent, the body's SHA-256 is its identity. */
  delivery_header: z.string().regex(/^[A-Za-z0-9\-]+$/).optional(),
  /** Notifications per seat per minute before the excess is coalesced into one wake. */
  rate_per_minute: z.number().int().min(1).max(MAX_RATE_PER_MINUTE).default(DEFAULT_RATE_PER_MINUTE),
  /** An `@handle` of an agent seat in a comment or message wakes that seat too. */
  mentions: z.boolean().default(true),
  /** The account the token acts as (GitHub login, Slack bot user id): its own events wake nobody. */
  self: z.string().min(1).optional(),
  routes: z.array(routeSchema).default([]),
});
export type IntegrationConfig = z.output<typeof integrationSchema>;

export const integrationsSchema = z.array(integrationSchema).default([]);

export interface IntegrationRefs {
  /** agent | human for a seat in the company, null for none. */
  seatKind(handle: string): "agent" | "human" | null;
  /** The unit's lead handle (null: no lead), or undefined for no such unit. */
  unitLead(id: string): string | null | undefined;
}

/** Refuses what the fleet could not run: duplicate ids, routes to nobody, a kind's wrong fields. */
export function checkIntegrations(list: readonly IntegrationConfig[], refs: IntegrationRefs, ctx: z.RefinementCtx, base: (string | number)[] = ["integrations"]): void {
  const ids = new Map<string, number>();
  list.forEach((integ, i) => {
    const at = (...p: (string | number)[]) => [...base, i, ...p];
    const prev = ids.get(integ.id);
    if (prev !== undefined) ctx.addIssue({ code: "custom", path: at("id"), message: `duplicate integration id "${integ.id}" (also integrations[${prev}])` });
    else ids.set(integ.id, i);
    integ.routes.forEach((r, j) => {
      if (r.seat !== undefined) {
        const kind = refs.seatKind(r.seat);
        if (kind === null) ctx.addIssue({ code: "custom", path: at("routes", j, "seat"), message: `unknown seat "${r.seat}"` });
        else if (kind !== "agent") ctx.addIssue({ code: "custom", path: at("routes", j, "seat"), message: `"${r.seat}" is a person; only agent seats are woken` });
      }
      if (r.unit !== undefined) {
        const lead = refs.unitLead(r.unit);
        if (lead === undefined) ctx.addIssue({ code: "custom", path: at("routes", j, "unit"), message: `unknown unit "${r.unit}"` });
        else if (lead === null || refs.seatKind(lead) !== "agent") ctx.addIssue({ code: "custom", path: at("routes", j, "unit"), message: `unit "${r.unit}" has no agent lead to wake` });
      }
      if (integ.kind !== "github" && (r.repository !== undefined || r.label !== undefined)) {
        ctx.addIssue({ code: "custom", path: at("routes", j, r.repository !== undefined ? "repository" : "label"), message: `only a github route matches on ${r.repository !== undefined ? "repository" : "label"}` });
      }
      if (integ.kind !== "slack" && r.channel !== undefined) {
        ctx.addIssue({ code: "custom", path: at("routes", j, "channel"), message: "only a slack route matches on channel" });
      }
    });
    if (integ.kind === "generic" && integ.token !== undefined) {
      ctx.addIssue({ code: "custom", path: at("token"), message: "a generic integration has no outbound tools, so no token" });
    }
  });
}

/** The REST base an integration's outbound calls use, without a trailing slash. */
export function baseUrlOf(integ: Pick<IntegrationConfig, "kind" | "base_url">): string | null {
  const url = integ.base_url ?? DEFAULT_BASE_URLS[integ.kind];
  return url === null ? null : url.replace(/\/+$/, "");
}
