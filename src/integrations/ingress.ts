// POST /hooks/{kind}/{id}: the one API route without a bearer token — the provider's
// signature over the raw body is the authentication. In order:
//   1. the integration exists and is of that kind (else 404);
//   2. the body is within MAX_WEBHOOK_BODY_BYTES (else 413, read no further);
//   3. the signature verifies (else 401, and nothing else happens: no parse, no claim);
//   4. the payload is read for the fields we use (Slack's url_verification is answered;
//      a type we do not route is 202 + a debug line; a missing used field is 202 +
//      integration_payload_unusable naming it — a provider must see success or it retries);
//   5. the routes pick the seats (none: 202 + a debug line);
//   6. the delivery is claimed in crewlet_claims (fleet-wide: a redelivery, or the same
//      delivery reaching two ingress nodes, finds the claim) and only then published to
//      CREWLET_NOTIFICATIONS with the delivery key as its message id.
// A claim is written `pending` before the publish and `published` after it. A delivery that
// finds a pending claim publishes again: the message id makes that a no-op when the first
// publish landed, and it is what recovers a node that died between claim and publish (the
// provider's retry reaches a peer). One that finds `published` is a duplicate: 200. A
// claim lives as long as crewlet_claims keeps anything — a day, for the reason given at
// SLOT_BUCKETS.claims (src/coord/buckets.ts): providers retry for hours, a person may
// press "redeliver" later that day, and a delivery older than that is a new event.
import { createHash } from "node:crypto";
import { Hono } from "hono";
import { z } from "zod";
import type { Clock } from "../clock.ts";
import { CasConflict, type KvSlot } from "../coord/contract.ts";
import type { Logger } from "../log.ts";
import type { Org } from "../org/org.ts";
import type { Queue } from "../queue/contract.ts";
import { NOTIFICATIONS_SUBJECT } from "../queue/topics.ts";
import type { RouteGroup } from "../api/app.ts";
import type { AuthEnv } from "../api/auth.ts";
import { BodyTooLarge, readBounded } from "../api/errors.ts";
import { INTEGRATION_KINDS, type IntegrationConfig } from "../config/integrations.ts";
import { parseGeneric } from "./generic.ts";
import { parseGithub } from "./github.ts";
import { deliveryKey, encodeNotification, type Notification } from "./notification.ts";
import { parseJson, type Parsed } from "./parsed.ts";
import { routeEvent } from "./route.ts";
import { verifyGeneric, verifyGithub, verifySlack, type Verdict } from "./signature.ts";
import { parseSlack, slackEventId } from "./slack.ts";

/**
 * Largest webhook body read. Every event we route (issues, comments, pull requests,
 * reviews, check runs, Slack messages) is tens of kilobytes at most; GitHub's own 25 MB
 * cap is for push events with huge commit lists, which we do not route. A megabyte keeps
 * a forged or runaway body from costing an ingress node more than that in memory before
 * its signature is even checked.
 */
export const MAX_WEBHOOK_BODY_BYTES = 1024 * 1024;

export const claimSchema = z.object({ state: z.enum(["pending", "published"]), node: z.string(), at: z.number() });
export type Claim = z.output<typeof claimSchema>;

export interface IngressOptions {
  nodeId: string;
  integrations: () => readonly IntegrationConfig[];
  org: () => Org;
  claims: KvSlot;
  queue: Pick<Queue, "publish">;
  clock: Clock;
  log: Logger;
}

export type IngressOutcome =
  | { status: 404 | 401 | 413 | 400 | 503; code: string; message: string }
  | { status: 200; challenge: string }
  | { status: 200; duplicate: true; delivery: string }
  | { status: 202; accepted: false; reason: string; field?: string }
  | { status: 202; accepted: true; delivery: string; seats: string[] };

function verify(integ: IntegrationConfig, header: (n: string) => string | undefined, body: Uint8Array, now_ms: number): Verdict {
  switch (integ.kind) {
    case "github":
      return verifyGithub(integ.secret, header, body);
    case "slack":
      return verifySlack(integ.secret, header, body, now_ms);
    case "generic":
      return verifyGeneric(integ.secret, integ.signature_header, header, body);
  }
}

/** The JSON payload: a JSON body, or GitHub's form encoding (`payload=<json>`). */
function payloadOf(contentType: string, text: string): unknown {
  if (contentType.toLowerCase().startsWith("application/x-www-form-urlencoded")) {
    const p = new URLSearchParams(text).get("payload");
    return p === null ? undefined : parseJson(p);
  }
  return parseJson(text);
}

/** Where a delivery id came from: the provider's header, Slack's event_id, or the body's hash. */
type DeliveryIdSource = "header" | "event_id" | "body_hash";

/**
 * The provider's own delivery id, or the body's hash where it gives none. GitHub always
 * sends X-GitHub-Delivery; a signed request without it (a proxy that strips X- headers) is
 * still authentic, and a GitHub redelivery resends the same bytes, so the hash dedupes what
 * the id would. It is accepted, not refused: GitHub does not retry a refused delivery on its
 * own, so a 4xx would lose the event. (The one case the hash cannot join: the same delivery
 * once with its header and once without wakes twice.)
 */
function deliveryIdOf(integ: IntegrationConfig, header: (n: string) => string | undefined, payload: unknown, body: Uint8Array): { id: string; from: DeliveryIdSource } {
  const hash = () => ({ id: `sha256:${createHash("sha256").update(body).digest("hex")}`, from: "body_hash" as const });
  const fromHeader = (name: string | undefined) => {
    const v = name ? header(name.toLowerCase())?.trim() : undefined;
    return v ? { id: v, from: "header" as const } : hash();
  };
  switch (integ.kind) {
    case "github":
      return fromHeader("x-github-delivery");
    case "slack": {
      const id = slackEventId(payload);
      return id !== null ? { id, from: "event_id" } : hash();
    }
    case "generic":
      return fromHeader(integ.delivery_header);
  }
}

export class Ingress {
  constructor(private readonly o: IngressOptions) {}

  /** One webhook request → its outcome. The route group only maps it to HTTP. */
  async accept(kind: string, id: string, req: Request): Promise<IngressOutcome> {
    const integ = this.o.integrations().find((i) => i.id === id);
    if (!integ || integ.kind !== kind || !(INTEGRATION_KINDS as readonly string[]).includes(kind)) {
      return { status: 404, code: "not_found", message: `no ${kind} integration "${id}"` };
    }
    let body: Uint8Array;
    try {
      body = await readBounded(req, MAX_WEBHOOK_BODY_BYTES);
    } catch (err) {
      if (err instanceof BodyTooLarge) {
        this.o.log.warn("integration_body_too_large", { integration: id, limit_bytes: MAX_WEBHOOK_BODY_BYTES });
        return { status: 413, code: "too_large", message: `body is over ${MAX_WEBHOOK_BODY_BYTES} bytes` };
      }
      throw err;
    }
    const header = (n: string) => req.headers.get(n) ?? undefined;
    const verdict = verify(integ, header, body, this.o.clock.now());
    if (!verdict.ok) {
      this.o.log.warn("integration_signature_refused", { integration: id, kind, reason: verdict.reason });
      return { status: 401, code: "unauthorized", message: "signature missing or invalid" };
    }
    const text = new TextDecoder().decode(body);
    const payload = payloadOf(header("content-type") ?? "application/json", text);
    if (payload === undefined) return { status: 400, code: "invalid_json", message: "body is not valid JSON" };
    const { id: delivery_id, from: delivery_id_from } = deliveryIdOf(integ, header, payload, body);
    let parsed: Parsed;
    switch (integ.kind) {
      case "github":
        parsed = parseGithub(header("x-github-event") ?? "", payload, integ.self);
        break;
      case "slack":
        parsed = parseSlack(payload, integ.self);
        break;
      case "generic":
        parsed = parseGeneric(payload, delivery_id);
        break;
    }
    if (parsed.status === "challenge") return { status: 200, challenge: parsed.challenge };
    if (parsed.status === "ignored") {
      this.o.log.debug("integration_event_unrouted", { integration: id, event_type: parsed.event, reason: parsed.reason });
      return { status: 202, accepted: false, reason: parsed.reason };
    }
    if (parsed.status === "unusable") {
      this.o.log.warn("integration_payload_unusable", { integration: id, event_type: parsed.event, field: parsed.field, message: parsed.message });
      return { status: 202, accepted: false, reason: `integration_payload_unusable: ${parsed.field}: ${parsed.message}`, field: parsed.field };
    }
    const event = parsed.event;
    const seats = routeEvent(integ, event, this.o.org());
    if (seats.length === 0) {
      this.o.log.debug("integration_event_unrouted", { integration: id, event_type: event.event, reason: "no route matches" });
      return { status: 202, accepted: false, reason: `no route matches ${event.event}` };
    }
    const delivery = deliveryKey(id, delivery_id);
    const notification: Notification = {
      v: 1,
      integration: id,
      kind: integ.kind,
      delivery,
      seats: seats.map((s) => s.seat),
      event,
      received_at: this.o.clock.now(),
    };
    try {
      const dup = await this.claimAndPublish(delivery, notification);
      if (dup) {
        this.o.log.info("integration_delivery_duplicate", { integration: id, delivery, delivery_id, delivery_id_from });
        return { status: 200, duplicate: true, delivery };
      }
    } catch (err) {
      this.o.log.warn("integration_delivery_unaccepted", { integration: id, delivery, error: err as Error });
      return { status: 503, code: "unavailable", message: "the delivery could not be recorded; send it again" };
    }
    this.o.log.info("integration_delivery_accepted", { integration: id, delivery, delivery_id, delivery_id_from, event_type: event.event, seats: notification.seats });
    return { status: 202, accepted: true, delivery, seats: notification.seats };
  }

  /** True when the delivery was already published (a duplicate); throws when it cannot be recorded. */
  private async claimAndPublish(delivery: string, n: Notification): Promise<boolean> {
    const claims = this.o.claims;
    const write = (state: Claim["state"]) => new TextEncoder().encode(JSON.stringify({ state, node: this.o.nodeId, at: this.o.clock.now() } satisfies Claim));
    let revision: number | null = null;
    try {
      revision = await claims.create(delivery, write("pending"));
    } catch (err) {
      if (!(err instanceof CasConflict)) throw err;
      const existing = await claims.get(delivery);
      const claim = existing && existing.operation === "put" ? claimSchema.safeParse(parseJson(new TextDecoder().decode(existing.value))) : null;
      if (claim?.success && claim.data.state === "published") return true;
      // Pending (a peer is publishing, or died doing it) or unreadable: publish again —
      // the message id makes a second publish of a landed one a no-op.
      revision = existing?.revision ?? null;
    }
    const result = await this.o.queue.publish(NOTIFICATIONS_SUBJECT, encodeNotification(n), { msgId: delivery });
    if (revision !== null) {
      // Best effort: a claim left pending only costs a later duplicate one more (deduped) publish.
      await claims.update(delivery, write("published"), revision).catch(() => undefined);
    }
    return result.duplicate;
  }

  /** The route group the node mounts at /hooks: no token, the signature decides. */
  routeGroup(): RouteGroup {
    return {
      prefix: "/hooks",
      routes: () => {
        const app = new Hono<AuthEnv>();
        app.post("/:kind/:id", async (c) => {
          const out = await this.accept(c.req.param("kind"), c.req.param("id"), c.req.raw);
          if ("challenge" in out) return c.json({ challenge: out.challenge }, 200);
          if ("code" in out) return c.json({ error: { code: out.code, message: out.message } }, out.status);
          const { status, ...rest } = out;
          return c.json(rest, status);
        });
        return app;
      },
    };
  }
}
