// `crewlet validate` runs every check `crewlet run` runs, from one list: scripted-rule
// patterns, port collisions, a writable logging.file, a parseable api.host, and a YAML
// file's own hazards (syntax named by line and column, alias bombs, aliases to nothing).
// Each case is loaded in-process, then given to both commands as real processes: validate
// exits 1 and run exits 2, both naming the same field, neither printing a stack trace.
import { afterAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ConfigError, parseConfig } from "../../src/config/load.ts";
import { CONFIG_CHECKS } from "../../src/config/checks.ts";
import { bwrapProblem } from "../../src/config/sandbox.ts";

const MAIN = resolve(import.meta.dir, "../../src/main.ts");
const dir = mkdtempSync(join(tmpdir(), "crewlet-checks-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function problems(yaml: string, env: Record<string, string> = {}): ConfigError["problems"] {
  try {
    parseConfig(yaml, "test.yaml", env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

const bomb = ["a: &a [x, x, x, x, x, x, x, x, x, x]", ...["b", "c", "d", "e", "f"].map((k, i) => `${k}: &${k} [${Array(10).fill(`*${"abcde"[i]}`).join(", ")}]`)].join("\n") + "\n";

// Random text gzip cannot shrink below one revision (1.47 MB of base64 is ~1.1 MB gzipped).
const incompressible = randomBytes(1_100_000).toString("base64");

const cases: [string, string, string, RegExp][] = [
  ["a company no stored revision can hold, even gzipped", `company:\n  name: A\n  mission: "${incompressible}"\n`, "company", /gzipped, over the 1047552-byte limit of one revision/],
  ["a scripted rule's pattern that does not compile", `company:\n  name: A\n  providers: {llm: {s: {type: scripted, rules: [{when: {text: "(?i)plan("}}]}}}\n`, "company.providers.llm.s.rules[0].when.text", /regular expression/],
  ["the API on the sidecar's client port", `api: {port: 4222}\n`, "stream.client_port", /4222 is also api.port/],
  ["the monitor on the API's port", `api: {port: 7711}\nstream: {monitor_port: 7711}\n`, "stream.monitor_port", /also api.port/],
  ["the cluster on the client port", `node: {id: m1}\ncoordination: {type: embedded-kv}\nstream: {client_port: 6300, cluster: {port: 6300, peers: ["127.0.0.1:6301", "127.0.0.1:6302"]}, replicas: 3}\n`, "stream.cluster.port", /also stream.client_port/],
  ["a lease TTL an R3 lease bucket's election outlasts", `node: {id: m1}\ncoordination: {type: embedded-kv, lease_ttl_seconds: 10}\nstream: {cluster: {peers: ["127.0.0.1:6301", "127.0.0.1:6302"]}, replicas: 3}\n`, "coordination.lease_ttl_seconds", /10 s is below 28 s, the smallest TTL a lease keeps through the lease bucket's leader election \(replicas 3: nats-server elects within 15 s/],
  ["the leaf listener on the monitor port", `node: {id: m1}\ncoordination: {type: embedded-kv}\nstream: {monitor_port: 7422, leaf: {port: 7422}}\n`, "stream.leaf.port", /also stream.monitor_port/],
  ["a logging.file under a regular file", `logging: {file: "${dir}/plain/x.log"}\n`, "logging.file", /not a directory/],
  ["a logging.file that is a directory", `logging: {file: "${dir}"}\n`, "logging.file", /is a directory/],
  ["an api.host that is not a host", `api: {host: "not a host"}\n`, "api.host", /not an IP address or host name/],
  ["an api.host in brackets", `api: {host: "[::1]"}\n`, "api.host", /without brackets/],
  ["a YAML syntax error", `node:\n  id: a\n roles: [data]\n`, "", /line 3, column 1/],
  ["an alias to no anchor", `node: {id: *nope}\n`, "", /alias \*nope .*line 1, column 12/],
  ["an alias bomb", bomb, "", /aliases expand past 100/],
  ["a sandbox engine that never sees its task", `company:\n  name: A\n  providers: {sandbox: {type: local, engines: {x: {command: [claude, "-p"]}}}}\n`, "company.providers.sandbox.engines.x.command", /no argument names \{task\}/],
  ["a sandbox repository git cannot clone", `company:\n  name: A\n  providers: {sandbox: {type: local, isolation: none, repo: {url: "-oProxyCommand=x"}, engines: {x: {command: [sh, "-c", "{task}"]}}}}\n`, "company.providers.sandbox.repo.url", /not a repository URL/],
  ["a sandbox limit that cannot work", `company:\n  name: A\n  providers: {sandbox: {type: local, isolation: none, limits: {wall_seconds: 0}, engines: {x: {command: [sh, "-c", "{task}"]}}}}\n`, "company.providers.sandbox.limits.wall_seconds", />=1/],
  ["a seat naming an engine that does not exist", `company:\n  name: A\n  providers: {sandbox: {type: local, isolation: none, engines: {x: {command: [sh, "-c", "{task}"]}}}}\n  roles: [{name: E, sandbox: {engines: [nope]}}]\n`, "company.roles[0].sandbox.engines[0]", /unknown engine "nope"/],
  ["a seat with a sandbox and no provider", `company:\n  name: A\n  roles: [{name: E, sandbox: {}}]\n`, "company.roles[0].sandbox", /no providers.sandbox/],
];

writeFileSync(join(dir, "plain"), "a file, not a directory\n");

test("one check list: every check is in it", () => {
  expect(CONFIG_CHECKS.map((c) => c.name)).toEqual(["topology", "ports", "api_host", "logging_file", "company_size", "sandbox_isolation", "lease_ttl"]);
});

for (const [name, yaml, path, message] of cases) {
  test(`refused by load, validate (exit 1) and run (exit 2): ${name}`, () => {
    const found = problems(yaml);
    expect(found.some((p) => p.path === path && message.test(p.message))).toBe(true);
    const file = join(dir, `${name.replace(/\W+/g, "-")}.yaml`);
    writeFileSync(file, yaml);
    const env = { ...process.env, CREWLET_NATS_SERVER: "/nonexistent" };
    const validate = Bun.spawnSync([process.execPath, MAIN, "validate", file], { stdout: "pipe", stderr: "pipe", env, cwd: dir });
    expect(validate.exitCode).toBe(1);
    const run = Bun.spawnSync([process.execPath, MAIN, "run", file], { stdout: "pipe", stderr: "pipe", env, cwd: dir });
    expect(run.exitCode).toBe(2);
    for (const out of [validate.stderr.toString(), run.stderr.toString()]) {
      expect(out).toMatch(message);
      if (path) expect(out).toContain(path);
      expect(out).not.toMatch(/\n\s+at .*\.ts:\d+/);
    }
    // --json: one JSON object, the same problems.
    const json = Bun.spawnSync([process.execPath, MAIN, "validate", "--json", file], { stdout: "pipe", stderr: "pipe", env, cwd: dir });
    expect(json.exitCode).toBe(1);
    expect(JSON.parse(json.stdout.toString())).toMatchObject({ valid: false, errors: expect.arrayContaining([expect.objectContaining({ path })]) });
  });
}

test("--json always prints JSON: a missing file, a bad flag", () => {
  const missing = Bun.spawnSync([process.execPath, MAIN, "validate", "--json", join(dir, "absent.yaml")], { stdout: "pipe", stderr: "pipe", cwd: dir });
  expect(missing.exitCode).toBe(1);
  expect(JSON.parse(missing.stdout.toString())).toMatchObject({ valid: false, errors: [{ message: expect.stringContaining("cannot read file") }] });
  const flag = Bun.spawnSync([process.execPath, MAIN, "validate", "--json", "--bogus"], { stdout: "pipe", stderr: "pipe", cwd: dir });
  expect(flag.exitCode).toBe(2);
  expect(JSON.parse(flag.stdout.toString()).valid).toBe(false);
});

test("${VAR} expands into numeric and boolean fields when unquoted; quoted stays a string", () => {
  const { config } = parseConfig("api:\n  port: ${PORT}\nlogging:\n  stderr: ${ERR:-false}\nnode:\n  id: \"${ID:-007}\"\n  max_concurrent: ${MC}\n", "x", { PORT: "7800", MC: "3" });
  expect(config.api.port).toBe(7800);
  expect(config.logging.stderr).toBe(false);
  expect(config.node.id).toBe("007");
  expect(config.node.max_concurrent).toBe(3);
  // A value that is not a number stays text and is refused naming the field.
  expect(problems("api:\n  port: ${PORT}\n", { PORT: "http" })).toContainEqual({ path: "api.port", message: expect.stringContaining("expected number") });
  // Quoted: a string, as written.
  expect(problems('api:\n  port: "${PORT}"\n', { PORT: "7800" }).map((p) => p.path)).toEqual(["api.port"]);
});

test("listeners on different addresses may share a port; a wildcard meets every address", () => {
  expect(problems(`node: {id: m1}\ncoordination: {type: embedded-kv}\napi: {host: 10.0.0.5, port: 4222}\n`)).toEqual([]);
  expect(problems(`api: {host: 0.0.0.0, port: 8222}\n`).map((p) => p.path)).toEqual(["stream.monitor_port"]);
  expect(problems(`api: {port: 0}\n`)).toEqual([]);
});

test("isolation: bwrap where bubblewrap is missing is refused naming what to do", () => {
  expect(bwrapProblem("/nonexistent/bwrap")).toMatch(/not installed — apt install bubblewrap, or set isolation: none/);
  expect(bwrapProblem()).toBeNull();
});

test("lease TTL: an R3 lease bucket needs 28 s; one replica has no election; tests lower the floor only under CREWLET_TESTING", () => {
  const r3 = (ttl: number, extra = "") => `node: {id: m1}\ncoordination: {type: embedded-kv, lease_ttl_seconds: ${ttl}}\nstream: {cluster: {peers: ["127.0.0.1:6301", "127.0.0.1:6302"]}, replicas: 3}\n${extra}`;
  const paths = (yaml: string, env: Record<string, string> = {}) => problems(yaml, env).map((p) => p.path);
  expect(paths(r3(28))).toEqual([]);
  expect(paths(r3(27))).toEqual(["coordination.lease_ttl_seconds"]);
  expect(paths(`node: {id: m1}\ncoordination: {type: embedded-kv, lease_ttl_seconds: 3}\n`)).toEqual([]);
  expect(paths(r3(3, "testing: {lease_ttl_floor_seconds: 1}\n"), { CREWLET_TESTING: "1" })).toEqual([]);
  expect(paths(r3(3, "testing: {lease_ttl_floor_seconds: 1}\n"))).toContain("testing");
});
