// What this build is. The crewlet version comes from package.json at build time.
import pkg from "../package.json" with { type: "json" };

export const CREWLET_VERSION: string = pkg.version;

export function platformArch(): string {
  return `linux-${process.arch === "arm64" ? "arm64" : process.arch}`;
}
