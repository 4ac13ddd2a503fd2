// The sandbox conformance suite on the local box: real bubblewrap, real git, real processes,
// the engine being test/support/fake-coding-cli.sh. Plus what only a real box can show:
// isolation (network, environment, filesystem), the kernel-held limits, a tree left behind,
// a missing bwrap, and cloning.
import { afterAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RunSpec } from "../../src/sandbox/contract.ts";
import { LocalBoxProvider } from "../../src/sandbox/local.ts";
import { ROOMY_LIMITS, sandboxConformance, settle, spec, type SandboxHarness } from "../conformance/sandbox.ts";
import { runProcesses } from "./procs.ts";

export const FAKE_CLI = join(import.meta.dir, "..", "support", "fake-coding-cli.sh");

export function localHarness(provider = new LocalBoxProvider()): SandboxHarness {
  const root = mkdtempSync(join(tmpdir(), "crewlet-box-"));
  let n = 0;
  return {
    provider,
    engine: (steps) => ({ command: ["/bin/sh", FAKE_CLI, "--print", "{task}"], task: steps.join(";") }),
    dir: () => join(root, `box-${++n}`),
    pass: (ms) => Bun.sleep(ms),
    processes: runProcesses,
    teardown: async () => rmSync(root, { recursive: true, force: true }),
  };
}

sandboxConformance("local box (bubblewrap)", async () => localHarness());

describe("local box: isolation, kernel limits, cleanup, cloning", () => {
  const h = localHarness(new LocalBoxProvider({ disk_check_interval_ms: 200 }));
  afterAll(() => h.teardown());
  const open = (steps: string[], over: Partial<RunSpec> = {}) => h.provider.open(spec(h, steps, over), h.dir());
  const run = async (steps: string[], over: Partial<RunSpec> = {}) => settle(h, await open(steps, over));

  test("no network inside the box unless the run may have it", async () => {
    const server = createServer((s) => s.end());
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as AddressInfo).port;
    try {
      const closed = await run([`net:${port}`]);
      expect(closed.output_tail).toBe("net blocked\n");
      const open_net = await run([`net:${port}`], { network: true });
      expect(open_net.output_tail).toBe("net ok\n");
    } finally {
      server.close();
    }
  }, 60_000);

  test("the node's environment stays out; the seat's env arrives", async () => {
    process.env.CREWLET_TEST_NODE_SECRET = "node-secret-value";
    try {
      const r = await run(["env:CLI_API_KEY", "env:CREWLET_TEST_NODE_SECRET", "envnames"], { env: { CLI_API_KEY: "sk-test-123" } });
      const [key, secret, names] = r.output_tail.trim().split("\n");
      expect(key).toBe("CLI_API_KEY=sk-test-123");
      expect(secret).toBe("CREWLET_TEST_NODE_SECRET is unset");
      // Only the base, the seat's env and the run's own names (PWD is the shell's).
      const allowed = new Set(["CLI_API_KEY", "CREWLET_CONTROL", "CREWLET_RUN_ID", "HOME", "LANG", "PATH", "TMPDIR", "PWD", "SHLVL", "OLDPWD", "_"]);
      expect((names ?? "").split(",").filter((n) => !allowed.has(n))).toEqual([]);
    } finally {
      delete process.env.CREWLET_TEST_NODE_SECRET;
    }
  }, 60_000);

  test("outside the work dir the filesystem is read-only (and /tmp is the box's own)", async () => {
    const outside = join(h.dir(), "..", "outside.txt");
    const r = await run(["touch:/etc/crewlet-probe", "touch:/usr/crewlet-probe", `touch:${outside}`, "touch:/tmp/scratch", "touch:inside.txt"]);
    expect(r.output_tail).toBe(
      `cannot write /etc/crewlet-probe\ncannot write /usr/crewlet-probe\nwrote ${outside}\nwrote /tmp/scratch\nwrote inside.txt\n`,
    );
    // What the box wrote beside its work dir landed in its private /tmp, not on the host.
    expect(existsSync(outside)).toBe(false);
    expect(existsSync("/etc/crewlet-probe")).toBe(false);
    expect(r.diff).toContain("b/inside.txt");
  }, 60_000);

  test("an engine whose script lives under /tmp (a checkout there) still runs: the box binds it in", async () => {
    const script = join(mkdtempSync(join(tmpdir(), "crewlet-engine-")), "fake-cli.sh");
    copyFileSync(FAKE_CLI, script);
    try {
      const r = await settle(h, await h.provider.open({ ...spec(h, []), command: ["/bin/sh", script, "{task}"], task: "print:from tmp" }, h.dir()));
      expect(r).toMatchObject({ outcome: "succeeded", output_tail: "from tmp\n" });
    } finally {
      rmSync(join(script, ".."), { recursive: true, force: true });
    }
  }, 60_000);

  test("a hidden path (the node's store, holding the box itself) is empty inside the box", async () => {
    const store = mkdtempSync(join(tmpdir(), "crewlet-store-"));
    try {
      writeFileSync(join(store, "api-token"), "secret-token-value");
      const box = await h.provider.open(
        { ...spec(h, []), command: ["/bin/sh", "-c", "{task}"], task: `cat ${store}/api-token 2>/dev/null || echo hidden; echo made > here.txt`, hide: [store] },
        join(store, "runs", "r1", "box"),
      );
      const r = await settle(h, box);
      expect(r.output_tail).toBe("hidden\n");
      // The box's own dirs, beneath the hidden store, still work.
      expect(r.diff).toContain("b/here.txt");
    } finally {
      rmSync(store, { recursive: true, force: true });
    }
  }, 60_000);

  test("the CPU limit ends a spinning engine, naming cpu_seconds", async () => {
    const r = await run(["print:spinning", "spin"], { limits: { ...ROOMY_LIMITS, cpu_seconds: 1 } });
    expect(r.outcome).toBe("limit");
    expect(r.reason).toContain("providers.sandbox.limits.cpu_seconds");
    expect(r.output_tail).toBe("spinning\n");
  }, 60_000);

  test("a file past disk_mb is stopped by the kernel, naming disk_mb", async () => {
    const r = await run(["fill:8", "print:never"], { limits: { ...ROOMY_LIMITS, disk_mb: 2 } });
    expect(r.outcome).toBe("limit");
    expect(r.reason).toContain("providers.sandbox.limits.disk_mb");
    expect(r.reason).toContain("a file reached it");
  }, 60_000);

  test("many files past disk_mb are found by the size check, naming disk_mb", async () => {
    const r = await run(["fill:2", "fill:2", "fill:2", "sleep:60"], { limits: { ...ROOMY_LIMITS, disk_mb: 5 } });
    expect(r.outcome).toBe("limit");
    expect(r.reason).toContain("providers.sandbox.limits.disk_mb");
    expect(r.reason).toContain("the box held");
  }, 60_000);

  for (const isolation of ["bwrap", "none"] as const) {
    test(`a tree the engine leaves behind is killed when it exits (isolation ${isolation})`, async () => {
      const box = await open(["bg:300", "print:left a sleep behind"], { isolation });
      const r = await settle(h, box);
      expect(r.outcome).toBe("succeeded");
      expect(r.summary).toBe("left a sleep behind");
      expect(runProcesses(box.run_id)).toBe(0);
    }, 60_000);
  }

  test("an engine that cannot be started fails the run; open does not throw", async () => {
    const r = await settle(h, await h.provider.open({ ...spec(h, []), command: ["/nonexistent/coding-cli", "{task}"] }, h.dir()));
    expect(r.outcome).toBe("failed");
    expect(r.reason).toContain("/nonexistent/coding-cli");
  }, 60_000);

  test("isolation bwrap without bubblewrap is refused naming the setting", async () => {
    const p = new LocalBoxProvider({ bwrap: "/nonexistent/bwrap" });
    const err = await p.open(spec(h, ["print:hi"]), h.dir()).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toContain("providers.sandbox.isolation");
    expect(err?.message).toContain("Install bubblewrap");
    expect(err?.message).toContain("isolation: none");
    // The same provider runs the engine unisolated when the setting says so.
    const r = await settle(h, await p.open(spec(h, ["print:unboxed"], { isolation: "none" }), h.dir()));
    expect(r.outcome).toBe("succeeded");
  }, 60_000);

  test("a repository is cloned (at a ref); the result is what the run added, and the repository is left as the engine left it", async () => {
    const bare = makeBareRepo(h.dir());
    const box = await open(["write:feature-note.txt=$ANSWER", "write:main-extra.txt=x", "commit:note the feature", "write:loose.txt=uncommitted", "print:done"], {
      repo: { url: `file://${bare}`, ref: "feature" },
    });
    const r = await settle(h, box);
    expect(r.outcome).toBe("succeeded");
    expect(existsSync(join(box.work_dir, "README.md"))).toBe(true);
    expect(existsSync(join(box.work_dir, "feature.txt"))).toBe(true);
    expect(r.commits).toHaveLength(1);
    expect(r.commits[0]).toMatch(/ note the feature$/);
    expect(r.diff).toContain("b/main-extra.txt");
    expect(r.diff).toContain("b/loose.txt");
    expect(r.diff).not.toContain("README.md");
    expect(r.diff).not.toContain("feature.txt\n");
    // Reading the result staged nothing: the loose file is still untracked.
    expect(git(box.work_dir, "status", "--porcelain")).toBe("?? loose.txt\n");
  }, 60_000);

  test("a clone that fails names the repository, never its credentials", async () => {
    const url = "https://crewlet-bot:tok3n-s3cret@127.0.0.1:9/acme/app.git";
    const err = await h.provider.open(spec(h, ["print:hi"], { repo: { url } }), h.dir()).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toContain("https://127.0.0.1:9/acme/app.git");
    expect(err?.message).not.toContain("tok3n");
    const missing = await h.provider.open(spec(h, ["print:hi"], { repo: { url: "/nonexistent/repo.git" } }), h.dir()).then(
      () => null,
      (e: Error) => e,
    );
    expect(missing?.message).toContain("cannot clone /nonexistent/repo.git");
  }, 60_000);
});

function git(cwd: string, ...args: string[]): string {
  const r = Bun.spawnSync(["git", "-c", "user.name=Test", "-c", "user.email=test@example.invalid", "-c", "init.defaultBranch=main", ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null", HOME: cwd },
  });
  if (r.exitCode !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr.toString()}`);
  return r.stdout.toString();
}

/** A bare repository with README.md on main and feature.txt on a branch "feature". */
function makeBareRepo(dir: string): string {
  const src = join(dir, "src");
  mkdirSync(src, { recursive: true });
  git(src, "init", "-q");
  writeFileSync(join(src, "README.md"), "# app\n");
  git(src, "add", "README.md");
  git(src, "commit", "-q", "-m", "readme");
  git(src, "checkout", "-q", "-b", "feature");
  writeFileSync(join(src, "feature.txt"), "feature\n");
  git(src, "add", "feature.txt");
  git(src, "commit", "-q", "-m", "feature");
  git(src, "checkout", "-q", "main");
  const bare = join(dir, "app.git");
  git(dir, "clone", "-q", "--bare", src, bare);
  return bare;
}
