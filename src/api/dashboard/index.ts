// The dashboard: GET /dashboard (and / redirecting to it) and its two assets, all open.
// The page carries no data and no token: it asks the person for the API token once, keeps
// it in sessionStorage and calls the API with it like any other client, so serving the
// page openly discloses nothing the open /health does not.
import { createHash } from "node:crypto";
import { Hono } from "hono";
import type { RouteGroup } from "../app.ts";
import type { AuthEnv } from "../auth.ts";
import pageText from "./page.html" with { type: "text" };
import styleText from "./dashboard.css" with { type: "text" };
import coreJs from "./client/core.client.js" with { type: "text" };
import fleetJs from "./client/fleet.client.js" with { type: "text" };
import agentsJs from "./client/agents.client.js" with { type: "text" };
import orgJs from "./client/org.client.js" with { type: "text" };
import agentJs from "./client/agent.client.js" with { type: "text" };
import seatControlsJs from "./client/seat-controls.client.js" with { type: "text" };
import runsJs from "./client/runs.client.js" with { type: "text" };
import approvalsJs from "./client/approvals.client.js" with { type: "text" };
import turnJs from "./client/turn.client.js" with { type: "text" };
import spendJs from "./client/spend.client.js" with { type: "text" };
import todayJs from "./client/today.client.js" with { type: "text" };
import chatJs from "./client/chat.client.js" with { type: "text" };
import workJs from "./client/work.client.js" with { type: "text" };
import eventsJs from "./client/events.client.js" with { type: "text" };
import bootJs from "./client/boot.client.js" with { type: "text" };
import liveJs from "./client/live.client.js" with { type: "text" };
import opsJs from "./client/ops.client.js" with { type: "text" };
import knowledgeJs from "./client/knowledge.client.js" with { type: "text" };
import filesJs from "./client/files.client.js" with { type: "text" };
import sentencesJs from "./event-sentences.js" with { type: "text" };
import todayWordsJs from "./today-words.js" with { type: "text" };
import companyDiffJs from "./company-diff.js" with { type: "text" };
// Kept libraries, pinned in package.json, served as they ship (their ES module builds):
// markdown to HTML, and the sanitizer every rendered page goes through.
import markedJs from "../../../node_modules/marked/lib/marked.esm.js" with { type: "text" };
import purifyJs from "../../../node_modules/dompurify/dist/purify.es.mjs" with { type: "text" };

/** bun-types types every `.html` import as an HTMLBundle; a text import is a string. */
function asText(asset: unknown, name: string): string {
  if (typeof asset !== "string") throw new Error(`dashboard asset ${name} was not imported as text`);
  return asset;
}

/** 12 hex digits of sha256: names an asset's content, so it may be cached for good. */
function contentName(base: string, ext: string, body: string): string {
  return `${base}.${createHash("sha256").update(body).digest("hex").slice(0, 12)}.${ext}`;
}

/**
 * The browser script's parts in the order they are joined into one module: the core
 * (helpers, API, refresh loop, view registry, routing) first, one part per view, and the
 * start last, once every view has registered. No build step: the parts are plain
 * JavaScript sharing one module scope, so a part may use any top-level name of another.
 */
const PARTS: ReadonlyArray<readonly [string, unknown]> = [
  ["core", coreJs],
  ["live", liveJs],
  ["event-sentences", sentencesJs],
  ["today-words", todayWordsJs],
  ["company-diff", companyDiffJs],
  ["fleet", fleetJs],
  ["agents", agentsJs],
  ["seat-controls", seatControlsJs],
  ["runs", runsJs],
  ["files", filesJs],
  ["org", orgJs],
  ["agent", agentJs],
  ["turn", turnJs],
  ["spend", spendJs],
  ["today", todayJs],
  ["chat", chatJs],
  ["work", workJs],
  ["events", eventsJs],
  ["ops", opsJs],
  ["knowledge", knowledgeJs],
  ["approvals", approvalsJs],
  ["boot", bootJs],
];
/** A library's module as served: its source-map comment dropped (the map is not served). */
function vendored(asset: unknown, name: string): string {
  return asText(asset, name).replace(/\n\/\/# sourceMappingURL=\S+\s*$/, "\n");
}
const MARKED = vendored(markedJs, "marked");
const PURIFY = vendored(purifyJs, "dompurify");
const MARKED_NAME = contentName("marked", "js", MARKED);
const PURIFY_NAME = contentName("purify", "js", PURIFY);
/** The libraries the parts use by name (Marked in knowledge, DOMPurify in knowledge). */
const IMPORTS = `import { Marked } from "./${MARKED_NAME}";\nimport DOMPurify from "./${PURIFY_NAME}";\n`;
const scriptText = IMPORTS + PARTS.map(([name, text]) => `// ---- ${name}\n${asText(text, name)}`).join("\n");

interface Asset {
  body: string;
  type: string;
}

const STYLE_NAME = contentName("dashboard", "css", styleText);
const SCRIPT_NAME = contentName("dashboard", "js", scriptText);
const PAGE = asText(pageText, "page.html").replace("{{style}}", `/dashboard/${STYLE_NAME}`).replace("{{script}}", `/dashboard/${SCRIPT_NAME}`);
const ASSETS = new Map<string, Asset>([
  [STYLE_NAME, { body: styleText, type: "text/css; charset=utf-8" }],
  [SCRIPT_NAME, { body: scriptText, type: "text/javascript; charset=utf-8" }],
  [MARKED_NAME, { body: MARKED, type: "text/javascript; charset=utf-8" }],
  [PURIFY_NAME, { body: PURIFY, type: "text/javascript; charset=utf-8" }],
]);

/**
 * Same-origin only: the page talks to this node's API and nothing else, inline script
 * and style are refused (nothing it shows can run), and no other site may frame it to
 * trick a click. `data:` images only for the blank favicon; `blob:` images only for a file's
 * preview (bytes the page fetched itself with the token, shown as an image, never run).
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data: blob:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy": CONTENT_SECURITY_POLICY,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

/** A content-named asset never changes under its name: a year is "for good" to a browser. */
const ASSET_CACHE_CONTROL = "public, max-age=31536000, immutable";
/** The page names the current assets, so it is checked on every load (a new binary). */
const PAGE_CACHE_CONTROL = "no-cache";

export function dashboardGroup(): RouteGroup {
  return {
    prefix: "/",
    routes: () => {
      const app = new Hono<AuthEnv>();
      app.get("/", (c) => c.redirect("/dashboard", 302));
      app.get("/dashboard", (c) => c.body(PAGE, 200, { ...SECURITY_HEADERS, "content-type": "text/html; charset=utf-8", "cache-control": PAGE_CACHE_CONTROL }));
      app.get("/dashboard/:asset", (c) => {
        const asset = ASSETS.get(c.req.param("asset"));
        if (!asset) return c.json({ error: { code: "not_found", message: `no dashboard asset ${c.req.param("asset")}` } }, 404);
        return c.body(asset.body, 200, { ...SECURITY_HEADERS, "content-type": asset.type, "cache-control": ASSET_CACHE_CONTROL });
      });
      return app;
    },
  };
}
