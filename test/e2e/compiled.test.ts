// The compiled binary with the root crewlet.yaml: a newcomer's first minutes. Ask @ceo for
// a plan through the API; a reply appears in the thread and work items exist for the
// seats named, which those seats then pick up.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { buildArch } from "../../build.ts";
import { hostArch } from "../../src/broker/elf.ts";
import { freePort } from "../support/ports.ts";
import { api, askCeoForAPlan, until } from "./support.ts";

const ROOT = resolve(import.meta.dir, "../..");
const work = mkdtempSync(join(tmpdir(), "crewlet-e2e-"));
let proc: ReturnType<typeof Bun.spawn> | null = null;
afterAll(async () => {
  if (proc && proc.exitCode === null) {
    proc.kill("SIGKILL");
    await proc.exited;
  }
  rmSync(work, { recursive: true, force: true });
});

test("the compiled binary runs the root company end to end", async () => {
  const built = buildArch(hostArch(), join(ROOT, "src/main.ts"), { outDir: join(work, "dist") });
  // The root file as shipped, on ports of its own so the test never meets a real node.
  const [api_port, client, monitor] = [await freePort(), await freePort(), await freePort()];
  const yaml = readFileSync(join(ROOT, "crewlet.yaml"), "utf8")
    .replace("client_port: 4222", `client_port: ${client}`)
    .replace("monitor_port: 8222", `monitor_port: ${monitor}`)
    .replace("port: 7700", `port: ${api_port}`)
    .replace("format: text", "format: json");
  writeFileSync(join(work, "crewlet.yaml"), yaml);
  const logFile = join(work, "node.log");
  proc = Bun.spawn([built.path, "run"], {
    cwd: work,
    stdout: "pipe",
    stderr: Bun.file(logFile),
    env: { ...process.env, CREWLET_STORE: join(work, "store") },
  });
  const url = `http://127.0.0.1:${api_port}`;
  await until("/ready", async () => (await fetch(`${url}/ready`).catch(() => null))?.ok, 30_000);
  // The boot summary carries the token minted at first boot; the API refuses without it.
  const token = readFileSync(join(work, "store", "api-token"), "utf8").trim();
  expect((await api(url, "/work", { token: "wrong-token-wrong-token-x" })).status).toBe(401);
  // Ready means serving; the first sweep's claims attach right after (≤ 4 per pass).
  const held = await until("the four agent seats held", async () => {
    const h = (await api(url, "/health", { token })).json;
    return h.seats.held.length === 4 ? h.seats.held : null;
  });
  expect([...held].sort()).toEqual(["ceo", "cto", "engineer", "pm"]);

  const { reply, items } = await askCeoForAPlan(url, token);
  expect(reply.body).toContain("@cto");
  expect(items.map((w: any) => w.key).sort()).toEqual(["ENG-1", "OPS-1"]);
  const agents = await api(url, "/agents/ceo", { token });
  expect(agents.json.turns.turns).toBeGreaterThanOrEqual(1);
  // /metrics from the binary: prom-client is bundled in, and the turns are counted.
  const scrape = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
  expect(scrape.status).toBe(200);
  expect(await scrape.text()).toMatch(/^crewlet_turns_total\{[^}]*outcome="[^"]+"[^}]*\} [1-9]/m);
  // The dashboard from the binary: the page, its script and the two libraries the script
  // imports (marked, DOMPurify) are embedded and served.
  const page = await (await fetch(`${url}/dashboard`)).text();
  const script = /<script type="module" src="([^"]+)"><\/script>/.exec(page)?.[1];
  expect(script).toBeDefined();
  const source = await (await fetch(`${url}${script}`)).text();
  const imports = [...source.matchAll(/^import .* from "\.\/([^"]+)";$/gm)].map((m) => m[1]!);
  expect(imports.length).toBe(2);
  for (const name of imports) {
    const lib = await fetch(`${url}/dashboard/${name}`);
    expect(lib.status).toBe(200);
    expect(lib.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(await lib.text()).toMatch(/export ?\{/);
  }

  proc.kill("SIGTERM");
  expect(await proc.exited).toBe(0);
  const summary = await new Response(proc.stdout as ReadableStream).text();
  expect(summary).toContain(token);
  // The minted token is printed once for a person, and never logged.
  expect(readFileSync(logFile, "utf8")).not.toContain(token);
}, 120_000);
