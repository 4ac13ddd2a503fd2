// A sidecar the kernel will not execute is reported in words naming its architecture, not
// as whatever /bin/sh made of the file (setsid's execvp hands an ENOEXEC file to sh: the
// arm64 binary under qemu-user with no binfmt_misc handler died with `Syntax error: ")"
// unexpected`). Real files, real spawns; only the wording table is pure.
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { systemClock } from "../../src/clock.ts";
import { memoryLogger } from "../../src/log.ts";
import { startBroker } from "../../src/broker/index.ts";
import { EXEC_FAILED_IN_CHILD, probeExec, unexecutableMessage, whyNotExecutable } from "../../src/broker/exec-check.ts";
import { hostArch } from "../../src/broker/elf.ts";
import { binaryFromSource } from "../../src/broker/binary.ts";
import { singleMemberPlan, tempStore } from "./fixtures/plans.ts";

const work = mkdtempSync(join(tmpdir(), "crewlet-exec-check-"));
const stores: string[] = [];
afterAll(() => {
  rmSync(work, { recursive: true, force: true });
  for (const s of stores) rmSync(s, { recursive: true, force: true });
});

/** A 64-byte ELF header for `e_machine` and nothing else: the kernel judges the header first. */
function elfHeaderFile(name: string, e_machine: number): string {
  const h = new Uint8Array(64);
  h.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]); // magic, ELFCLASS64, little-endian, version 1
  new DataView(h.buffer).setUint16(16, 2, true); // ET_EXEC
  new DataView(h.buffer).setUint16(18, e_machine, true);
  new DataView(h.buffer).setUint32(20, 1, true);
  const path = join(work, name);
  writeFileSync(path, h);
  chmodSync(path, 0o755);
  return path;
}

/** EM_BPF: no kernel runs it and no qemu-user emulates it, so ENOEXEC on any machine. */
const EM_BPF = 247;
const EM_AARCH64 = 183;

describe("the words", () => {
  const enoexec = { ran: false, code: "ENOEXEC", message: "ENOEXEC: posix_spawn" } as const;
  test("an arm64 sidecar refused while the node itself runs as arm64: the node is emulated, register binfmt_misc", () => {
    const m = unexecutableMessage("/s/bin/nats-server", { e_machine: EM_AARCH64, arch: "arm64" }, enoexec, "arm64");
    expect(m).toContain("it is a linux-arm64 (aarch64, ELF machine 183) executable and the kernel refused it (ENOEXEC)");
    expect(m).toContain("register qemu-aarch64 in binfmt_misc");
  });
  test("under qemu-user the child's exit 127 stands for the errno the spawn cannot see, with the same advice", () => {
    const m = unexecutableMessage("/s/nats", { e_machine: EM_AARCH64, arch: "arm64" }, { ran: false, code: EXEC_FAILED_IN_CHILD, message: "" }, "arm64");
    expect(m).toContain(`linux-arm64 (aarch64, ELF machine 183) executable and the kernel refused it (${EXEC_FAILED_IN_CHILD})`);
    expect(m).toContain("register qemu-aarch64 in binfmt_misc");
  });
  test("an arm64 sidecar beside an x64 node: run one built for this machine", () => {
    const m = unexecutableMessage("/s/nats", { e_machine: EM_AARCH64, arch: "arm64" }, enoexec, "x64");
    expect(m).toContain("linux-arm64 (aarch64");
    expect(m).toContain("run a nats-server built for x86_64");
  });
  test("a machine we do not ship names its number", () => {
    expect(unexecutableMessage("/s/nats", { e_machine: EM_BPF, arch: null }, enoexec, "x64")).toContain("an ELF executable for machine 247 (neither x64 nor arm64)");
  });
  test("EACCES points at a noexec store", () => {
    const m = unexecutableMessage("/s/nats", { e_machine: 62, arch: "x64" }, { ran: false, code: "EACCES", message: "" }, "x64");
    expect(m).toContain("mounted without noexec");
  });
});

describe("on real files", () => {
  test("the pinned nats-server runs, so a death is its own", () => {
    expect(probeExec(binaryFromSource().path)).toEqual({ ran: true });
    expect(whyNotExecutable(binaryFromSource().path)).toBeNull();
  });

  test("an ELF for a machine nobody runs is ENOEXEC, named by its number", () => {
    const path = elfHeaderFile("nats-server-bpf", EM_BPF);
    expect(probeExec(path)).toMatchObject({ ran: false, code: "ENOEXEC" });
    expect(whyNotExecutable(path)).toContain(`${path} cannot be executed on this machine: it is an ELF executable for machine 247`);
  });

  // Only where no emulator is registered for aarch64: with one, the kernel hands the header
  // to qemu, which runs (and fails on its own terms).
  const aarch64Handled = existsSync("/proc/sys/fs/binfmt_misc/qemu-aarch64") || hostArch() === "arm64";
  test.skipIf(aarch64Handled)("an arm64 ELF on an x64 kernel without a handler is named as arm64", () => {
    const path = elfHeaderFile("nats-server-arm64", EM_AARCH64);
    expect(whyNotExecutable(path)).toContain("it is a linux-arm64 (aarch64, ELF machine 183) executable and the kernel refused it (ENOEXEC)");
  });

  test("the broker refuses to start on it with those words, and logs nats_binary_not_executable", async () => {
    const path = elfHeaderFile("nats-server-refused", EM_BPF);
    const before = process.env.CREWLET_NATS_SERVER;
    process.env.CREWLET_NATS_SERVER = path;
    const store = tempStore();
    stores.push(store);
    const { log, sink } = memoryLogger();
    try {
      const err = await startBroker(await singleMemberPlan(store), { log, clock: systemClock }).then(
        () => null,
        (e: Error) => e,
      );
      expect(err?.name).toBe("BrokerError");
      expect(err?.message).toContain("cannot be executed on this machine: it is an ELF executable for machine 247");
      expect(err?.message).not.toContain("Syntax error");
      expect(sink.events("nats_binary_not_executable").length).toBe(1);
    } finally {
      if (before === undefined) delete process.env.CREWLET_NATS_SERVER;
      else process.env.CREWLET_NATS_SERVER = before;
    }
  });
});
