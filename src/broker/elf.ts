// Reads the machine an ELF executable was built for, so the build can refuse to embed
// an x64 nats-server in the arm64 binary (or the reverse) and tests can prove it did not.
import { closeSync, openSync, readSync } from "node:fs";

export type Arch = "x64" | "arm64";

/** e_machine values from the ELF specification (EM_X86_64, EM_AARCH64). */
const MACHINES: Record<number, Arch> = { 62: "x64", 183: "arm64" };

/** e_machine sits at offset 18 in both ELF32 and ELF64 headers; 20 bytes cover it. */
const HEADER_BYTES = 20;

export interface ElfMachine {
  e_machine: number;
  arch: Arch | null;
}

/** Parses an ELF header; throws when the bytes are not a little-endian ELF file. */
export function elfMachine(header: Uint8Array): ElfMachine {
  if (header.length < HEADER_BYTES) throw new Error("not an ELF file: shorter than its header");
  const magic = header[0] === 0x7f && header[1] === 0x45 && header[2] === 0x4c && header[3] === 0x46;
  if (!magic) throw new Error("not an ELF file: bad magic");
  // EI_DATA = 1: little-endian, which both of our targets are.
  if (header[5] !== 1) throw new Error("not a little-endian ELF file");
  const e_machine = header[18]! | (header[19]! << 8);
  return { e_machine, arch: MACHINES[e_machine] ?? null };
}

export function elfMachineOfFile(path: string): ElfMachine {
  const fd = openSync(path, "r");
  try {
    const buf = new Uint8Array(HEADER_BYTES);
    const n = readSync(fd, buf, 0, HEADER_BYTES, 0);
    return elfMachine(buf.subarray(0, n));
  } finally {
    closeSync(fd);
  }
}

export function hostArch(): Arch {
  if (process.arch === "x64" || process.arch === "arm64") return process.arch;
  throw new Error(`unsupported architecture ${process.arch}: Crewlet ships linux x64 and arm64`);
}
