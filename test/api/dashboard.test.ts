// The dashboard's routes through app.request: the page and its assets are served openly,
// carry no data and no token, have the right types and headers, and leave every API route
// behind its token.
import { describe, expect, test } from "bun:test";
import { Hono } from "hono";
import { createApp } from "../../src/api/app.ts";
import { TokenAuth, type AuthEnv } from "../../src/api/auth.ts";
import { dashboardGroup } from "../../src/api/dashboard/index.ts";
import { silentLogger } from "../../src/log.ts";

const TOKEN = "dashboard-test-token-0123456789";
/** Distinctive facts the node knows; none may appear in what the open routes serve. */
const NODE_ID = "node-7f3a9c";
const SECRET_TITLE = "Quarterly numbers 4b1e";

const app = createApp({
  auth: new TokenAuth([{ id: "ops", token: TOKEN, grants: ["state:read"] }]),
  log: silentLogger,
  health: { health: () => ({ node: NODE_ID, roles: ["data", "ingress"], version: "0.0.0" }), notReadyReason: () => null },
  groups: [
    dashboardGroup(),
    {
      prefix: "/work",
      routes: (auth) => new Hono<AuthEnv>().get("/", auth.require("state:read"), (c) => c.json({ items: [{ key: "ENG-1", title: SECRET_TITLE }], next: null })),
    },
  ],
});

async function page(): Promise<{ res: Response; html: string }> {
  const res = await app.request("/dashboard");
  return { res, html: await res.text() };
}

function assetPaths(html: string): { css: string; js: string } {
  const css = /<link rel="stylesheet" href="([^"]+)">/.exec(html)?.[1];
  const js = /<script type="module" src="([^"]+)"><\/script>/.exec(html)?.[1];
  if (!css || !js) throw new Error(`the page names no stylesheet or script:\n${html}`);
  return { css, js };
}

describe("dashboard", () => {
  test("the page is served without a token, as HTML, with a strict content policy", async () => {
    const { res, html } = await page();
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain("unsafe-inline");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(html.startsWith("<!doctype html>")).toBe(true);
    // It asks for the token rather than carrying one.
    expect(html).toContain('<input id="token" name="token" type="password"');
    // No inline script: the policy would refuse it, and the page would show nothing.
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
  });

  test("nothing served openly holds the token or the node's data", async () => {
    const { html } = await page();
    const { css, js } = assetPaths(html);
    for (const text of [html, await (await app.request(css)).text(), await (await app.request(js)).text()]) {
      expect(text).not.toContain(TOKEN);
      expect(text).not.toContain(NODE_ID);
      expect(text).not.toContain(SECRET_TITLE);
      expect(text).not.toContain("{{");
    }
  });

  test("the assets are served with their types, under names that change with their content", async () => {
    const { html } = await page();
    const { css, js } = assetPaths(html);
    expect(css).toMatch(/^\/dashboard\/dashboard\.[0-9a-f]{12}\.css$/);
    expect(js).toMatch(/^\/dashboard\/dashboard\.[0-9a-f]{12}\.js$/);
    const style = await app.request(css);
    expect(style.status).toBe(200);
    expect(style.headers.get("content-type")).toBe("text/css; charset=utf-8");
    expect(style.headers.get("cache-control")).toContain("immutable");
    expect(await style.text()).toContain(":root");
    const script = await app.request(js);
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    const source = await script.text();
    // It parses as a module, and shows what it is given as text, never as markup.
    expect(() => new Bun.Transpiler({ loader: "js" }).transformSync(source)).not.toThrow();
    expect(source).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
    // The token lives in this tab's sessionStorage only.
    expect(source).toContain("sessionStorage");
    expect(source).not.toContain("localStorage");
  });

  test("the two libraries the script imports (marked, DOMPurify) are served under content names, as modules, without source-map comments", async () => {
    const { html } = await page();
    const source = await (await app.request(assetPaths(html).js)).text();
    const imports = [...source.matchAll(/^import (.*) from "\.\/([^"]+)";$/gm)].map((m) => ({ what: m[1], name: m[2]! }));
    expect(imports.map((i) => i.what)).toEqual(["{ Marked }", "DOMPurify"]);
    for (const { name } of imports) {
      expect(name).toMatch(/^(marked|purify)\.[0-9a-f]{12}\.js$/);
      const res = await app.request(`/dashboard/${name}`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
      expect(res.headers.get("cache-control")).toContain("immutable");
      expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
      const lib = await res.text();
      expect(lib).not.toContain("sourceMappingURL");
      expect(() => new Bun.Transpiler({ loader: "js" }).transformSync(lib)).not.toThrow();
    }
  });

  test("an unknown asset is a 404 in the API's error shape", async () => {
    const res = await app.request("/dashboard/dashboard.000000000000.js");
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("not_found");
  });

  test("/ redirects to the dashboard", async () => {
    const res = await app.request("/");
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/dashboard");
  });

  test("the API stays behind its token and the probes stay open beside the dashboard", async () => {
    expect((await app.request("/work")).status).toBe(401);
    expect((await app.request("/work", { headers: { authorization: "Bearer wrong-token-000000000000" } })).status).toBe(401);
    const ok = await app.request("/work", { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ok.status).toBe(200);
    expect((await app.request("/health")).status).toBe(200);
    expect((await app.request("/no-such-route")).status).toBe(404);
  });
});
