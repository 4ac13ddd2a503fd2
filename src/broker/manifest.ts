// appliance/sidecar.json: the nats-server release every binary embeds and every from-source
// run uses, pinned by sha256 per architecture. build.ts checks what it embeds against it;
// from source, binary.ts finds the binary scripts/setup.sh built into appliance/cache.
import { join } from "node:path";
import { z } from "zod";
import raw from "../../appliance/sidecar.json";
import type { Arch } from "./elf.ts";

const Sha256 = z.string().regex(/^[0-9a-f]{64}$/);
const Version = z.string().regex(/^\d+\.\d+\.\d+$/);
const GoToolchain = z.string().regex(/^go\d+\.\d+(\.\d+)?$/);

const Release = z.object({
  version: Version,
  go_toolchain: GoToolchain,
  arches: z.object({ x64: z.object({ sha256: Sha256 }), arm64: z.object({ sha256: Sha256 }) }),
});

const ArchTarget = z.object({ goarch: z.enum(["amd64", "arm64"]), e_machine: z.number().int(), sha256: Sha256 });

export const SidecarManifest = z.object({
  name: z.literal("nats-server"),
  module: z.literal("github.com/nats-io/nats-server/v2"),
  version: Version,
  go_toolchain: GoToolchain,
  arches: z.object({ x64: ArchTarget, arm64: ArchTarget }),
  /** The release before `version`, kept for the mixed-version (rolling upgrade) test. */
  previous: Release,
});
export type SidecarManifest = z.infer<typeof SidecarManifest>;

export function parseSidecarManifest(value: unknown, where = "appliance/sidecar.json"): SidecarManifest {
  const parsed = SidecarManifest.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`${where}: field ${issue.path.join(".")}: ${issue.message}`);
  }
  return parsed.data;
}

/** The manifest as committed (bundled into a compiled binary, read from the tree from source). */
export function sidecarManifest(): SidecarManifest {
  return parseSidecarManifest(raw);
}

/** The source tree's appliance/ dir; it exists only when running from source. */
export const APPLIANCE_DIR = join(import.meta.dir, "..", "..", "appliance");

/** Where appliance/fetch-sidecar.sh leaves a release's binary for `arch`. */
export function cachedSidecarPath(version: string, arch: Arch): string {
  return join(APPLIANCE_DIR, "cache", `nats-server-${version}-${arch}`);
}
