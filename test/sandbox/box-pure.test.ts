// The box's pure rules as tables: the argv and environment an engine starts with, how a run's
// end is classified and worded, the output ring, secrets kept out of messages, the question
// bookkeeping. Plus the two small real-process helpers they rest on (bounded runs, crewlet-ask).
import { describe, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { systemClock } from "../../src/clock.ts";
import { boxEnv, bwrapArgv, CPU_HARD_GRACE_SECONDS, engineArgv, engineMounts, limitArgv, resultMounts, type BoxPaths } from "../../src/sandbox/box-argv.ts";
import { runBounded } from "../../src/sandbox/box-exec.ts";
import { redactUrl, scrubSecrets } from "../../src/sandbox/box-git.ts";
import { classify, type EndFacts } from "../../src/sandbox/box-outcome.ts";
import { lastLine, OUTPUT_TAIL_BYTES_MAX, OutputTail, SUMMARY_CHARS_MAX } from "../../src/sandbox/box-output.ts";
import { ASK_SCRIPT, cutUtf8, QuestionBoard, QuestionFiles } from "../../src/sandbox/box-questions.ts";
import type { Question, RunLimits } from "../../src/sandbox/contract.ts";

const LIMITS: RunLimits = { wall_seconds: 60, cpu_seconds: 30, memory_mb: 512, disk_mb: 100, output_bytes: 1000 };
const PATHS: BoxPaths = { dir: "/b", work: "/b/work", control: "/b/control", home: "/b/home" };

describe("engineArgv", () => {
  test.each([
    [["claude", "-p", "{task}"], "fix it", ["claude", "-p", "fix it"]],
    [["sh", "-c", "echo {task} && echo {task}"], "x", ["sh", "-c", "echo x && echo x"]],
    [["cli", "--task={task}"], "a $HOME `b` $(c) {task}", ["cli", "--task=a $HOME `b` $(c) {task}"]],
    [["cli", "no placeholder"], "ignored", ["cli", "no placeholder"]],
  ])("%j with %j", (command, task, want) => {
    expect(engineArgv(command, task)).toEqual(want);
  });
});

describe("limitArgv", () => {
  test("every limit, soft CPU below hard, no core dumps", () => {
    expect(limitArgv("/usr/bin/prlimit", LIMITS)).toEqual([
      "/usr/bin/prlimit",
      `--cpu=30:${30 + CPU_HARD_GRACE_SECONDS}`,
      `--as=${512 * 1024 * 1024}`,
      `--fsize=${100 * 1024 * 1024}`,
      "--core=0",
      "--",
    ]);
  });
  test("fractions round to what the kernel takes, never to zero", () => {
    const argv = limitArgv("prlimit", { ...LIMITS, cpu_seconds: 0.2, memory_mb: 0.5, disk_mb: 1.5 });
    expect(argv.slice(1, 4)).toEqual([`--cpu=1:${1 + CPU_HARD_GRACE_SECONDS}`, `--as=${512 * 1024}`, `--fsize=${1.5 * 1024 * 1024}`]);
  });
});

describe("bwrapArgv", () => {
  const all = { cap_drop: true, tmpfs_size: true };
  const base = ["bwrap", "--die-with-parent", "--new-session", "--unshare-all"];
  const mounts = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"];
  const binds = ["--bind", "/b/work", "/b/work", "--bind", "/b/home", "/b/home", "--bind", "/b/control/questions", "/b/control/questions", "--ro-bind", "/b/control/bin", "/b/control/bin", "--chdir", "/b/work"];
  const tmp = ["--size", String(100 * 1024 * 1024), "--tmpfs", "/tmp"];
  test.each([
    ["no network, every feature", { network: false, limits: LIMITS }, all, [...base, ...mounts, ...tmp, ...binds, "--cap-drop", "ALL", "--"]],
    ["network shared", { network: true, limits: LIMITS }, all, [...base, "--share-net", ...mounts, ...tmp, ...binds, "--cap-drop", "ALL", "--"]],
    ["an old bwrap: no cap-drop, unsized /tmp", { network: false, limits: LIMITS }, { cap_drop: false, tmpfs_size: false }, [...base, ...mounts, "--tmpfs", "/tmp", ...binds, "--"]],
  ] as const)("%s", (_name, spec, features, want) => {
    expect(bwrapArgv("bwrap", spec, engineMounts(PATHS), features)).toEqual([...want]);
  });
  test("reading the result: the scratch dir writable, the questions not there at all", () => {
    const argv = bwrapArgv("bwrap", { network: false, limits: LIMITS }, resultMounts(PATHS), all);
    expect(argv).toContain("/b/control/scratch");
    expect(argv).not.toContain("/b/control/questions");
    expect(argv).not.toContain("--share-net");
  });
});

describe("boxEnv", () => {
  test("base + seat env + the run's names; nothing else", () => {
    expect(boxEnv({ run_id: "r1", env: { KEY: "k" } }, PATHS, "/usr/bin:/bin")).toEqual({
      HOME: "/b/home",
      LANG: "C.UTF-8",
      TMPDIR: "/tmp",
      KEY: "k",
      PATH: "/b/control/bin:/usr/bin:/bin",
      CREWLET_RUN_ID: "r1",
      CREWLET_CONTROL: "/b/control",
    });
  });
  test("the seat may set PATH, HOME and LANG, not the run's own names; crewlet-ask stays first on PATH", () => {
    const env = boxEnv({ run_id: "r1", env: { PATH: "/opt/cli/bin", HOME: "/h", LANG: "de_DE.UTF-8", CREWLET_RUN_ID: "x", CREWLET_CONTROL: "/y" } }, PATHS, "/usr/bin");
    expect(env.PATH).toBe("/b/control/bin:/opt/cli/bin");
    expect(env.HOME).toBe("/h");
    expect(env.LANG).toBe("de_DE.UTF-8");
    expect(env.CREWLET_RUN_ID).toBe("r1");
    expect(env.CREWLET_CONTROL).toBe("/b/control");
  });
  test("no host PATH: Debian's default", () => {
    expect(boxEnv({ run_id: "r", env: {} }, PATHS, undefined).PATH).toBe("/b/control/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  });
});

describe("classify", () => {
  const facts = (over: Partial<EndFacts>): EndFacts => ({
    cancelled: null,
    enforced: null,
    end: { kind: "exited", code: 0, signal: null },
    last_line: "",
    limits: LIMITS,
    ...over,
  });
  const exited = (code: number | null, signal: string | null = null) => ({ kind: "exited" as const, code, signal });
  test.each([
    ["exit 0", facts({ last_line: "done" }), "succeeded", 0, ""],
    ["exit 3 with a last line", facts({ end: exited(3), last_line: "tests failed" }), "failed", 3, "the engine exited with code 3: tests failed"],
    ["exit 1 silent", facts({ end: exited(1) }), "failed", 1, "the engine exited with code 1"],
    ["killed by a signal", facts({ end: exited(null, "SIGSEGV"), last_line: "x" }), "failed", null, "the engine was killed by SIGSEGV: x"],
    ["out of memory", facts({ end: exited(1), last_line: "fatal: Out of memory, malloc failed" }), "failed", 1, "the engine exited with code 1: fatal: Out of memory, malloc failed (the memory limit of 512 MiB may be why — providers.sandbox.limits.memory_mb)"],
    ["never started", facts({ end: { kind: "not_started", error: "spawn x ENOENT" } }), "failed", null, "the engine could not start: spawn x ENOENT"],
    ["wall", facts({ enforced: { kind: "wall" }, end: exited(null, "SIGTERM") }), "limit", null, "wall time limit of 60 s reached — raise providers.sandbox.limits.wall_seconds"],
    ["disk by the size check", facts({ enforced: { kind: "disk", used_mb: 130 }, end: exited(null, "SIGTERM") }), "limit", null, "disk limit of 100 MiB reached (the box held 130 MiB) — raise providers.sandbox.limits.disk_mb"],
    ["SIGXCPU", facts({ end: exited(null, "SIGXCPU") }), "limit", null, "CPU time limit of 30 s reached — raise providers.sandbox.limits.cpu_seconds"],
    ["SIGXCPU through bwrap (128+24)", facts({ end: exited(152) }), "limit", null, "CPU time limit of 30 s reached — raise providers.sandbox.limits.cpu_seconds"],
    ["SIGXFSZ through bwrap (128+25)", facts({ end: exited(153) }), "limit", null, "disk limit of 100 MiB reached (a file reached it) — raise providers.sandbox.limits.disk_mb"],
    ["cancel wins over how it died", facts({ cancelled: "seat_removed", end: exited(null, "SIGTERM") }), "cancelled", null, "seat_removed"],
  ] as const)("%s", (_name, f, outcome, exit_code, reason) => {
    expect(classify(f)).toEqual({ outcome, exit_code, reason });
  });
});

describe("OutputTail", () => {
  const enc = (s: string) => new TextEncoder().encode(s);
  test.each([
    ["fits", 10, ["abc", "def"], "abcdef", 6],
    ["wraps", 5, ["abc", "def", "gh"], "defgh", 8],
    ["one chunk past capacity", 4, ["0123456789"], "6789", 10],
    ["exactly full", 3, ["ab", "c"], "abc", 3],
    ["keeps nothing at 0", 0, ["abc"], "", 3],
    ["a cut multibyte character at the front is dropped", 4, ["aé€"], "€", 6],
  ] as const)("%s", (_name, cap, chunks, text, total) => {
    const t = new OutputTail(cap);
    for (const c of chunks) t.push(enc(c));
    expect(t.text()).toBe(text);
    expect(t.total).toBe(total);
  });
  test("capacity is bounded whatever is configured", () => {
    expect(new OutputTail(10 * OUTPUT_TAIL_BYTES_MAX).capacity).toBe(OUTPUT_TAIL_BYTES_MAX);
  });
});

describe("lastLine", () => {
  test.each([
    ["a\nb\n", "b"],
    ["a\nb\n\n  \n", "b"],
    ["  only  ", "only"],
    ["x\r\ny\r\n", "y"],
    ["", ""],
    ["\n\n", ""],
  ])("%j → %j", (text, want) => {
    expect(lastLine(text)).toBe(want);
  });
  test("bounded", () => {
    expect(lastLine("x".repeat(5 * SUMMARY_CHARS_MAX)).length).toBe(SUMMARY_CHARS_MAX + 1);
  });
});

describe("credentials never in a message", () => {
  test.each([
    ["https://user:tok@github.com/a/b.git", "https://github.com/a/b.git"],
    ["https://x-access-token:ghp_abc@github.com/a/b", "https://github.com/a/b"],
    ["https://github.com/a/b.git", "https://github.com/a/b.git"],
    ["git@github.com:a/b.git", "git@github.com:a/b.git"],
    ["/srv/repos/app.git", "/srv/repos/app.git"],
  ])("redactUrl(%j)", (url, want) => {
    expect(redactUrl(url)).toBe(want);
  });
  test("git's message loses the URL's credentials, raw or decoded", () => {
    const url = "https://bot:p%40ss-w0rd@example.com/a.git";
    const msg = scrubSecrets(`fatal: unable to access '${url}': auth failed for p@ss-w0rd and https://bot:other@example.com`, url);
    expect(msg).toBe("fatal: unable to access 'https://example.com/a.git': auth failed for *** and https://example.com");
  });
});

describe("questions", () => {
  test("each seq told once, in order, to every listener, a late one too; one answer per asked seq", async () => {
    const board = new QuestionBoard();
    const early: Question[] = [];
    board.listen((q) => early.push(q));
    board.listen(() => {
      throw new Error("a failing listener harms no other");
    });
    expect(board.ask({ seq: 1, text: "a" })).toBe(true);
    expect(board.ask({ seq: 1, text: "a again" })).toBe(false);
    expect(board.ask({ seq: 2, text: "b" })).toBe(true);
    expect(board.take(3)).toBe(false);
    expect(board.take(1)).toBe(true);
    expect(board.take(1)).toBe(false);
    const late: Question[] = [];
    board.listen((q) => late.push(q));
    await Promise.resolve();
    expect(early).toEqual([{ seq: 1, text: "a" }, { seq: 2, text: "b" }]);
    expect(late).toEqual([{ seq: 2, text: "b" }]);
  });

  test("cutUtf8 never splits a character", () => {
    expect(cutUtf8("héllo", 2)).toBe("h");
    expect(cutUtf8("héllo", 3)).toBe("hé");
    expect(cutUtf8("short", 100)).toBe("short");
  });

  test("crewlet-ask: concurrent asks take distinct seqs; each prints its own answer", async () => {
    const control = mkdtempSync(join(tmpdir(), "crewlet-ask-"));
    try {
      mkdirSync(join(control, "questions"));
      writeFileSync(join(control, "crewlet-ask"), ASK_SCRIPT, { mode: 0o755 });
      const ask = (text: string) =>
        new Promise<string>((resolve) => {
          const child = spawn("/bin/sh", [join(control, "crewlet-ask"), text], { env: { PATH: "/usr/bin:/bin", CREWLET_CONTROL: control } });
          let out = "";
          child.stdout.on("data", (d: Buffer) => (out += d.toString()));
          child.on("close", () => resolve(out));
        });
      const pending = ["red?", "green?", "blue?"].map(ask);
      const files = new QuestionFiles(join(control, "questions"));
      const seen: Question[] = [];
      for (let i = 0; i < 200 && seen.length < 3; i++) {
        seen.push(...files.poll());
        await Bun.sleep(25);
      }
      expect(seen.map((q) => q.seq)).toEqual([1, 2, 3]);
      expect(seen.map((q) => q.text).sort()).toEqual(["blue?", "green?", "red?"]);
      for (const q of seen) files.answer(q.seq, `answer to ${q.text}`);
      const answers = await Promise.all(pending);
      expect(answers).toEqual(["answer to red?\n", "answer to green?\n", "answer to blue?\n"]);
    } finally {
      rmSync(control, { recursive: true, force: true });
    }
  }, 30_000);

  test("a question file that is a link is read as empty, and an answer never writes through a link", () => {
    const dir = mkdtempSync(join(tmpdir(), "crewlet-q-"));
    try {
      const secret = join(dir, "host-secret");
      writeFileSync(secret, "do not read");
      Bun.spawnSync(["ln", "-s", secret, join(dir, "1.q")]);
      Bun.spawnSync(["ln", "-s", secret, join(dir, "1.a.tmp")]);
      const files = new QuestionFiles(dir);
      expect(files.poll()).toEqual([{ seq: 1, text: "" }]);
      files.answer(1, "hi");
      expect(readFileSync(secret, "utf8")).toBe("do not read");
      expect(readFileSync(join(dir, "1.a"), "utf8")).toBe("hi\n");
      expect(existsSync(join(dir, "1.a.tmp"))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("runBounded", () => {
  const env = { PATH: "/usr/bin:/bin" };
  test("stdout past its bound is cut and the command stopped", async () => {
    const r = await runBounded(["/bin/sh", "-c", "yes 0123456789"], { env, timeout_ms: 30_000, stdout_bytes_max: 1000, clock: systemClock });
    expect(r.truncated).toBe(true);
    expect(r.stdout.length).toBe(1000);
  });
  test("a command past its time is killed with what it started", async () => {
    const r = await runBounded(["/bin/sh", "-c", "sleep 300 & sleep 300"], { env, timeout_ms: 200, stdout_bytes_max: 1000, clock: systemClock });
    expect(r.timed_out).toBe(true);
    expect(r.signal).toBe("SIGKILL");
  });
  test("a missing command is a spawn error, not a throw", async () => {
    const r = await runBounded(["/nonexistent/tool"], { env, timeout_ms: 1000, stdout_bytes_max: 1000, clock: systemClock });
    expect(r.spawn_error).toContain("ENOENT");
  });
});
