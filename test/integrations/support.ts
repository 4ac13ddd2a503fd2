// Test support for the integrations: the provider fixtures (payloads and headers written
// from GitHub's and Slack's documented examples) signed the way each provider signs, and
// the root company with integrations routed to its seats.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { companySchema, type Company } from "../../src/config/company.ts";
import { signGeneric, signGithub, signSlack } from "../../src/integrations/signature.ts";
import { rootCompany } from "../agent/support.ts";

export const GH_SECRET = "gh-webhook-secret-0123456789";
export const SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5";
export const GENERIC_SECRET = "generic-hmac-secret-0123456789";

export interface Fixture {
  headers: Record<string, string>;
  body: any;
}

export function fixture(name: string): Fixture {
  return JSON.parse(readFileSync(join(import.meta.dir, "fixtures", `${name}.json`), "utf8")) as Fixture;
}

/** A fixture as GitHub sends it: the raw body and both signature headers. */
export function githubRequest(f: Fixture, secret = GH_SECRET, overrides: { delivery?: string; body?: any } = {}): { headers: Record<string, string>; body: string } {
  const body = JSON.stringify(overrides.body ?? f.body);
  const headers: Record<string, string> = { ...f.headers, "X-Hub-Signature-256": signGithub(secret, body) };
  if (overrides.delivery) headers["X-GitHub-Delivery"] = overrides.delivery;
  return { headers, body };
}

export function slackRequest(f: Fixture, now_ms = Date.now(), secret = SLACK_SECRET, body_override?: any): { headers: Record<string, string>; body: string } {
  const body = JSON.stringify(body_override ?? f.body);
  const ts = Math.floor(now_ms / 1000);
  return { headers: { ...f.headers, "X-Slack-Request-Timestamp": String(ts), "X-Slack-Signature": signSlack(secret, ts, body) }, body };
}

export function genericRequest(payload: unknown, secret = GENERIC_SECRET, delivery?: string): { headers: Record<string, string>; body: string } {
  const body = JSON.stringify(payload);
  return { headers: { "Content-Type": "application/json", "X-Signature-256": signGeneric(secret, body), ...(delivery ? { "X-Delivery": delivery } : {}) }, body };
}

/** The root company (ceo, cto, pm, engineer; founder a person) with three integrations. */
export function integrationsCompany(opts: { githubBase?: string; slackBase?: string; rate?: number } = {}): Company {
  const root = rootCompany() as any;
  const raw = {
    ...root,
    integrations: [
      {
        id: "gh",
        kind: "github",
        secret: GH_SECRET,
        token: "ghp_test_token_0123456789",
        ...(opts.githubBase ? { base_url: opts.githubBase } : {}),
        ...(opts.rate ? { rate_per_minute: opts.rate } : {}),
        routes: [
          { seat: "cto", events: ["issues.opened", "pull_request", "pull_request_review.submitted", "pull_request_review_comment.created", "check_run.completed"], repository: "octocat/Hello-World" },
          { seat: "pm", events: ["issues.labeled"], label: "needs-triage" },
          { unit: "eng", events: ["issue_comment.created"] },
        ],
      },
      {
        id: "slack",
        kind: "slack",
        secret: SLACK_SECRET,
        token: "xoxb-test-token-0123456789",
        ...(opts.slackBase ? { base_url: opts.slackBase } : {}),
        routes: [
          { channel: "C024BE91L", unit: "ops" },
          { seat: "ceo", events: ["app_mention"] },
        ],
      },
      { id: "ci", kind: "generic", secret: GENERIC_SECRET, delivery_header: "X-Delivery", routes: [{ seat: "engineer", events: ["build.failed"] }] },
    ],
  };
  return companySchema.parse(raw);
}

/** A stand-in for GitHub's and Slack's REST APIs in fleet tests: answers every call as a
 * success and records its path. */
export function recordingProviderServer(): { port: number; paths: string[]; stop(): void } {
  const paths: string[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const body = (await req.json().catch(() => null)) as { channel?: string } | null;
      const path = new URL(req.url).pathname;
      paths.push(path);
      if (path.endsWith("/chat.postMessage")) return Response.json({ ok: true, channel: body?.channel, ts: "1700000000.000100" });
      return Response.json({ id: paths.length, html_url: "https://github.com/octocat/Hello-World/issues/1347#issuecomment-1" }, { status: 201 });
    },
  });
  return { port: server.port!, paths, stop: () => server.stop(true) };
}
