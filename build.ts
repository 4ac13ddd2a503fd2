// bun run build.ts [--arch x64|arm64 ...] [--entry src/main.ts]
//
// Compiles dist/crewlet-linux-x64 and dist/crewlet-linux-arm64 from src/main.ts, each with
// its own architecture's nats-server embedded zstd-compressed. The sidecar binary must be
// the one appliance/sidecar.json pins (sha256) and built for the target's machine (ELF
// e_machine); anything else is refused. The compressed sidecar is passed to
// `bun build --compile` as an extra entrypoint, so it lands in Bun.embeddedFiles under its
// own name, which src/broker/binary.ts reads; from source that list is simply empty.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { sidecarAssetName } from "./src/broker/binary.ts";
import { elfMachineOfFile, type Arch } from "./src/broker/elf.ts";
import { cachedSidecarPath, parseSidecarManifest, type SidecarManifest } from "./src/broker/manifest.ts";

const ROOT = import.meta.dir;
const CACHE = join(ROOT, "appliance", "cache");
const DIST = join(ROOT, "dist");

/** Bun's names for the compile targets. */
const BUN_TARGET: Record<Arch, string> = { x64: "bun-linux-x64", arm64: "bun-linux-arm64" };

/**
 * zstd level 19: the sidecar is most of what we add to Bun's runtime, and 19 takes the
 * stripped 2.15.2 x64 server's 17.1 MB to 5.6 MB (gzip -9: 6.7 MB) while still
 * decompressing in ~85 ms at first boot (measured on a loaded 2-core box). Levels above
 * 19 gain little and cost far more build time.
 */
const ZSTD_LEVEL = 19;

function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(2)} MiB`;
}

/** Read fresh from disk (not the module import), so a re-pin is seen without a restart. */
export function loadManifest(): SidecarManifest {
  const path = join(ROOT, "appliance", "sidecar.json");
  return parseSidecarManifest(JSON.parse(readFileSync(path, "utf8")), path);
}

/** Checks a sidecar binary is the pinned one and built for `arch`; returns its bytes. */
export function verifiedSidecar(path: string, arch: Arch, manifest: SidecarManifest): Uint8Array {
  const entry = manifest.arches[arch];
  const machine = elfMachineOfFile(path);
  if (machine.e_machine !== entry.e_machine) {
    throw new Error(`${path} is built for ELF machine ${machine.e_machine} (${machine.arch ?? "unknown"}), not ${arch} (${entry.e_machine}): refusing to embed it`);
  }
  const bytes = readFileSync(path);
  const got = sha256(bytes);
  if (got !== entry.sha256) throw new Error(`${path} has sha256 ${got}; appliance/sidecar.json pins ${entry.sha256} for ${arch}`);
  return bytes;
}

/** The compressed asset for `arch`, made once per sidecar hash and kept in the cache. */
function compressedAsset(arch: Arch, manifest: SidecarManifest): string {
  const entry = manifest.arches[arch];
  const bin = cachedSidecarPath(manifest.version, arch);
  if (!existsSync(bin)) {
    console.error(`build: ${bin} missing; building it from the Go module`);
    const r = Bun.spawnSync(["bash", join(ROOT, "appliance", "fetch-sidecar.sh"), arch], { stdout: "inherit", stderr: "inherit" });
    if (r.exitCode !== 0) throw new Error(`appliance/fetch-sidecar.sh ${arch} failed`);
  }
  const bytes = verifiedSidecar(bin, arch, manifest);
  const asset = join(CACHE, "assets", arch, sidecarAssetName(manifest.version, arch, entry.sha256));
  if (!existsSync(asset)) {
    mkdirSync(join(CACHE, "assets", arch), { recursive: true });
    const zst = Bun.zstdCompressSync(bytes, { level: ZSTD_LEVEL });
    // Round-trip before trusting it: a bad asset would only show at a user's first boot.
    if (sha256(Bun.zstdDecompressSync(zst)) !== entry.sha256) throw new Error(`zstd round trip of ${bin} failed`);
    writeFileSync(`${asset}.tmp`, zst);
    renameSync(`${asset}.tmp`, asset);
  }
  return asset;
}

export interface BuiltBinary {
  arch: Arch;
  path: string;
  bytes: number;
  sidecar_zst_bytes: number;
}

export function buildArch(arch: Arch, entry: string, opts: { manifest?: SidecarManifest; outDir?: string } = {}): BuiltBinary {
  const manifest = opts.manifest ?? loadManifest();
  const asset = compressedAsset(arch, manifest);
  const outDir = opts.outDir ?? DIST;
  mkdirSync(outDir, { recursive: true });
  const out = join(outDir, `crewlet-linux-${arch}`);
  const cmd = [
    process.execPath,
    "build",
    "--compile",
    `--target=${BUN_TARGET[arch]}`,
    // Keep the asset's own name: binary.ts reads version, arch and hash from it.
    "--asset-naming=[name].[ext]",
    "--minify",
    entry,
    asset,
    "--outfile",
    out,
  ];
  const r = Bun.spawnSync(cmd, { cwd: ROOT, stdout: "inherit", stderr: "inherit" });
  if (r.exitCode !== 0) throw new Error(`bun build for ${arch} failed (exit ${r.exitCode})`);
  const built = elfMachineOfFile(out);
  if (built.arch !== arch) throw new Error(`${out} came out as ELF machine ${built.e_machine}, not ${arch}`);
  return { arch, path: out, bytes: statSync(out).size, sidecar_zst_bytes: statSync(asset).size };
}

/** qemu-user and an aarch64 loader (Debian: qemu-user-static, libc6-arm64-cross). */
const QEMU: Partial<Record<Arch, { bin: string; ld: string }>> = { arm64: { bin: "qemu-aarch64-static", ld: "/usr/aarch64-linux-gnu" } };

/**
 * Set (to 1) by .ci/run: every binary's `version` smoke must run, a foreign arch's under
 * qemu, so a CI machine that lost qemu fails the build instead of printing "not run". A
 * local build without qemu still skips it, and says so.
 */
export const REQUIRE_SMOKE_ENV = "CREWLET_BUILD_REQUIRE_SMOKE";

/**
 * Runs `<binary> version --json` (under qemu for a foreign arch when it is installed) and
 * checks the binary reports the embedded nats-server of its own architecture. Returns
 * what it saw, or why it could not look; throws when it could not look and `required`
 * (by default: REQUIRE_SMOKE_ENV is 1). `qemu` is which emulator runs each foreign arch
 * (tests name one that is not there).
 */
export function smokeVersion(b: BuiltBinary, opts: { required?: boolean; qemu?: typeof QEMU } = {}): string {
  const required = opts.required ?? process.env[REQUIRE_SMOKE_ENV] === "1";
  let argv = [b.path, "version", "--json"];
  const env: Record<string, string> = { ...(process.env as Record<string, string>) };
  if (b.arch !== process.arch) {
    const q = (opts.qemu ?? QEMU)[b.arch] ?? null;
    const qemu = q ? Bun.which(q.bin) : null;
    if (!q || !qemu || !existsSync(q.ld)) {
      const missing = !q ? `no qemu is known for ${b.arch}` : !qemu ? `${q.bin} is not on PATH` : `${q.ld} (the ${b.arch} loader) is missing`;
      if (required) throw new Error(`${b.path} version: not run under qemu (${missing}) and ${REQUIRE_SMOKE_ENV}=1 requires it`);
      return `not run (${missing}; set ${REQUIRE_SMOKE_ENV}=1 to make this an error, as .ci/run does)`;
    }
    argv = [qemu, ...argv];
    env.QEMU_LD_PREFIX = q.ld;
  }
  const r = Bun.spawnSync(argv, { env, stdout: "pipe", stderr: "pipe", timeout: 120_000 });
  const text = r.stdout.toString().trim();
  let info: { nats_server_arch?: unknown; nats_server_source?: unknown; nats_server?: unknown };
  try {
    info = JSON.parse(text.split("\n").pop() ?? "");
  } catch {
    throw new Error(`${b.path} version --json printed no JSON (exit ${r.exitCode}): ${text || r.stderr.toString().trim()}`);
  }
  if (info.nats_server_arch !== b.arch || info.nats_server_source !== "embedded") {
    throw new Error(`${b.path} reports nats-server ${String(info.nats_server_arch)} from ${String(info.nats_server_source)}, expected embedded ${b.arch}`);
  }
  return `version ran: embedded nats-server ${String(info.nats_server)} ${String(info.nats_server_arch)}`;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Bun.argv.slice(2),
    options: {
      arch: { type: "string", multiple: true },
      entry: { type: "string", default: "src/main.ts" },
    },
    strict: true,
  });
  const arches = (values.arch ?? ["x64", "arm64"]) as Arch[];
  for (const a of arches) if (a !== "x64" && a !== "arm64") throw new Error(`--arch ${a}: expected x64 or arm64`);
  const entry = resolve(ROOT, values.entry!);
  if (!existsSync(entry)) throw new Error(`${values.entry} missing: it is the CLI entry the binaries are compiled from`);
  const manifest = loadManifest();
  for (const arch of arches) {
    const b = buildArch(arch, entry, { manifest });
    console.log(`${b.path}: ${mb(b.bytes)} (${arch}; embedded nats-server ${manifest.version}, ${mb(b.sidecar_zst_bytes)} zstd)`);
    console.log(`  smoke: ${smokeVersion(b)}`);
  }
}
