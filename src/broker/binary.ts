// Finds the nats-server to run. The compiled binary carries it zstd-compressed as an
// embedded file (build.ts passes it to `bun build --compile` as an extra entrypoint, so it
// shows up in Bun.embeddedFiles; from source that list is empty and nothing breaks). A
// compiled binary cannot exec an embedded file in place, so it is extracted into the
// store dir, named by content hash. From source: CREWLET_NATS_SERVER, else the pinned
// release scripts/setup.sh built into appliance/cache (so source runs and tests use the
// same server as the binaries; never whatever nats-server happens to be on PATH).
import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "../log.ts";
import { elfMachineOfFile, hostArch, type Arch } from "./elf.ts";
import { cachedSidecarPath, sidecarManifest } from "./manifest.ts";

/** The embedded asset's name carries what we need to know without decompressing it. */
const ASSET = /^crewlet-sidecar-(\d+\.\d+\.\d+)-(x64|arm64)-([0-9a-f]{64})\.zst$/;

export function sidecarAssetName(version: string, arch: Arch, sha256: string): string {
  return `crewlet-sidecar-${version}-${arch}-${sha256}.zst`;
}

export interface EmbeddedSidecar {
  version: string;
  arch: Arch;
  /** sha256 of the uncompressed nats-server. */
  sha256: string;
  blob: Blob;
}

export function parseAssetName(name: string): Omit<EmbeddedSidecar, "blob"> | null {
  const m = ASSET.exec(name);
  return m ? { version: m[1]!, arch: m[2] as Arch, sha256: m[3]! } : null;
}

export function embeddedSidecar(files: readonly Blob[] = Bun.embeddedFiles): EmbeddedSidecar | null {
  for (const blob of files) {
    const name = (blob as Blob & { name?: string }).name ?? "";
    const meta = parseAssetName(name);
    if (meta) return { ...meta, blob };
  }
  return null;
}

export interface SidecarBinary {
  path: string;
  source: "embedded" | "env" | "cache";
  /** Its release, e.g. "2.15.2"; null when it would not say. */
  version: string | null;
}

/** What `<bin> --version` reports ("nats-server: v2.15.2"), or null. A file the kernel will
 * not execute is null too, with the spawn's error as text: the sidecar's start then says
 * why in words (exec-check.ts). */
export function reportedVersion(path: string): { version: string | null; text: string } {
  let text: string;
  try {
    const out = Bun.spawnSync([path, "--version"], { stdout: "pipe", stderr: "pipe" });
    text = `${out.stdout.toString()}${out.stderr.toString()}`;
  } catch (err) {
    return { version: null, text: (err as Error).message };
  }
  const m = /v?(\d+\.\d+\.\d+)/.exec(text);
  return { version: m ? m[1]! : null, text: text.trim() };
}

function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** The hash prefix in the file name: distinct per build of nats-server, short enough to read. */
const NAME_HASH_CHARS = 16;

/**
 * Extracts the embedded sidecar into binDir unless an intact copy is there. Atomic: write
 * a temp name, chmod, rename. A copy already in place is never rewritten (a running
 * nats-server's file cannot be opened for writing: ETXTBSY); a damaged one is replaced
 * by rename, which leaves any process still running it untouched.
 */
export async function extractEmbedded(sidecar: EmbeddedSidecar, binDir: string, log: Logger): Promise<string> {
  const target = join(binDir, `nats-server-${sidecar.version}-${sidecar.arch}-${sidecar.sha256.slice(0, NAME_HASH_CHARS)}`);
  if (existsSync(target)) {
    if (sha256Hex(readFileSync(target)) === sidecar.sha256) return target;
    log.warn("nats_binary_damaged", { path: target });
  }
  const bytes = Bun.zstdDecompressSync(new Uint8Array(await sidecar.blob.arrayBuffer()));
  const got = sha256Hex(bytes);
  if (got !== sidecar.sha256) {
    throw new Error(`embedded nats-server is corrupt: sha256 ${got}, expected ${sidecar.sha256}`);
  }
  mkdirSync(binDir, { recursive: true });
  const tmp = `${target}.tmp-${process.pid}-${Date.now().toString(36)}`;
  try {
    writeFileSync(tmp, bytes, { mode: 0o700 });
    chmodSync(tmp, 0o755);
    renameSync(tmp, target);
  } finally {
    rmSync(tmp, { force: true });
  }
  log.info("nats_binary_extracted", { path: target, version: sidecar.version, bytes: statSync(target).size });
  return target;
}

export function binaryFromSource(env: Record<string, string | undefined> = process.env): SidecarBinary {
  const fromEnv = env.CREWLET_NATS_SERVER;
  if (fromEnv) {
    if (!existsSync(fromEnv)) throw new Error(`CREWLET_NATS_SERVER=${fromEnv}: no such file`);
    return { path: fromEnv, source: "env", version: reportedVersion(fromEnv).version };
  }
  const version = sidecarManifest().version;
  const cached = cachedSidecarPath(version, hostArch());
  if (!existsSync(cached)) {
    throw new Error(`nats-server ${version} not built: run scripts/setup.sh (it builds the pinned server with Go into ${cached}), or set CREWLET_NATS_SERVER to a nats-server`);
  }
  return { path: cached, source: "cache", version };
}

/** The nats-server this process will run: embedded (extracted into binDir) or from source. */
export async function locateSidecarBinary(binDir: string, log: Logger): Promise<SidecarBinary> {
  const embedded = embeddedSidecar();
  if (embedded) return { path: await extractEmbedded(embedded, binDir, log), source: "embedded", version: embedded.version };
  return binaryFromSource();
}

export interface SidecarVersion {
  /** e.g. "2.15.2", or null when no nats-server is to be found. */
  version: string | null;
  arch: Arch | null;
  source: "embedded" | "env" | "cache" | "missing";
  detail?: string;
}

/** For `crewlet version`: what nats-server this binary would run, without starting it. */
export function natsServerVersion(): SidecarVersion {
  const embedded = embeddedSidecar();
  if (embedded) return { version: embedded.version, arch: embedded.arch, source: "embedded" };
  let bin: SidecarBinary;
  try {
    bin = binaryFromSource();
  } catch (err) {
    return { version: null, arch: null, source: "missing", detail: (err as Error).message };
  }
  const { version, text } = reportedVersion(bin.path);
  let arch: Arch | null = null;
  try {
    arch = elfMachineOfFile(bin.path).arch;
  } catch {
    arch = null;
  }
  return { version, arch, source: bin.source, ...(version ? {} : { detail: text }) };
}
