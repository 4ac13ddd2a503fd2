// Why a sidecar binary cannot run on this machine, in words naming its architecture. The
// node starts nats-server through setsid and setpriv, whose execvp hands a file the kernel
// refuses (ENOEXEC) to /bin/sh: the arm64 binary run under qemu-user on an x86_64 kernel
// with no binfmt_misc handler died with `Syntax error: ")" unexpected`, which names nothing
// an operator can act on. Executing the file directly gets the kernel's own answer.
import { hostArch, elfMachineOfFile, type Arch, type ElfMachine } from "./elf.ts";

/** Linux's names for our arches, as `uname -m` and binfmt_misc print them. */
const KERNEL_NAME: Record<Arch, string> = { x64: "x86_64", arm64: "aarch64" };

/** A direct exec of `--version` answers in milliseconds (seconds under emulation); a hung one is not an exec failure. */
const PROBE_TIMEOUT_MS = 30_000;

/** What executing the file directly did: ran (whatever its exit), or the spawn's error code. */
export type ExecProbe = { ran: true } | { ran: false; code: string; message: string };

/**
 * Under qemu-user the spawn cannot report the exec's errno (qemu runs vfork as a fork): the
 * child exits 127 having printed nothing, which nats-server --version never does. Measured
 * with the arm64 binary under qemu-aarch64-static on an x86_64 kernel without a handler.
 */
export const EXEC_FAILED_IN_CHILD = "exec failed in the child: exit 127, no output";

export function probeExec(path: string): ExecProbe {
  try {
    const r = Bun.spawnSync([path, "--version"], { stdin: "ignore", stdout: "pipe", stderr: "pipe", timeout: PROBE_TIMEOUT_MS });
    if (r.exitCode === 127 && r.stdout.length === 0 && r.stderr.length === 0) return { ran: false, code: EXEC_FAILED_IN_CHILD, message: EXEC_FAILED_IN_CHILD };
    return { ran: true };
  } catch (err) {
    const e = err as Error & { code?: unknown };
    return { ran: false, code: typeof e.code === "string" ? e.code : "unknown", message: e.message };
  }
}

function machineWords(m: ElfMachine | null): string {
  if (!m) return "not an ELF executable";
  if (!m.arch) return `an ELF executable for machine ${m.e_machine} (neither x64 nor arm64)`;
  return `a linux-${m.arch} (${KERNEL_NAME[m.arch]}, ELF machine ${m.e_machine}) executable`;
}

/**
 * Pure: the sentence for a sidecar the kernel would not execute. `nodeArch` is what this
 * process believes it runs as; under qemu-user that is the emulated arch, which is how a
 * sidecar of the node's own arch can still be refused.
 */
export function unexecutableMessage(path: string, machine: ElfMachine | null, probe: Extract<ExecProbe, { ran: false }>, nodeArch: Arch): string {
  if (probe.code === "ENOENT") return `the nats-server sidecar ${path} cannot be executed on this machine: it, or the loader it names, is missing (ENOENT)`;
  const head = `the nats-server sidecar ${path} cannot be executed on this machine: it is ${machineWords(machine)} and the kernel refused it (${probe.code})`;
  if (probe.code === "EACCES") {
    return `${head}; the store dir (its bin/ holds the extracted sidecar) must be on a filesystem mounted without noexec, and the file executable by this user`;
  }
  if ((probe.code !== "ENOEXEC" && probe.code !== EXEC_FAILED_IN_CHILD) || !machine?.arch) return head;
  if (machine.arch === nodeArch) {
    // Same arch as the node, yet refused: the node itself is emulated (qemu-user), and the
    // kernel has no handler to emulate its children.
    return (
      `${head}. This node runs as linux-${nodeArch}, so it is itself emulated on a kernel of another architecture: ` +
      `register qemu-${KERNEL_NAME[nodeArch]} in binfmt_misc (Debian: qemu-user-static and binfmt-support; the F flag) so ${KERNEL_NAME[nodeArch]} children run too, ` +
      `or run the crewlet binary built for this machine's architecture`
    );
  }
  return `${head}. This node runs as linux-${nodeArch}: run a nats-server built for ${KERNEL_NAME[nodeArch]}`;
}

/** Why `path` cannot be executed here, or null when the kernel runs it (so a death was nats-server's own). */
export function whyNotExecutable(path: string, probe: (p: string) => ExecProbe = probeExec): string | null {
  const result = probe(path);
  if (result.ran) return null;
  let machine: ElfMachine | null = null;
  try {
    machine = elfMachineOfFile(path);
  } catch {
    machine = null;
  }
  return unexecutableMessage(path, machine, result, hostArch());
}
