#!/usr/bin/env bash
# Obtains the pinned nats-server for each architecture from Debian's own package, checks
# both the .deb and the binary against appliance/sidecar.json, and leaves the binaries in
# appliance/cache/nats-server-<version>-<arch> for build.ts. Needs root (or sudo) only to
# teach apt a foreign architecture; already-verified binaries are not fetched again.
#   usage: appliance/fetch-sidecar.sh [x64|arm64 ...]    (default: both)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
manifest="$here/sidecar.json"
cache="$here/cache"
mkdir -p "$cache"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
field() { node -e 'const m=require(process.argv[1]); let v=m; for (const k of process.argv[2].split(".")) v=v[k]; process.stdout.write(String(v))' "$manifest" "$1"; }

version="$(field version)"
package="$(field debian_package)"
deb_version="$(field debian_version)"
inner="$(field path_in_package)"
native="$(dpkg --print-architecture)"

arches=("$@")
[ ${#arches[@]} -eq 0 ] && arches=(x64 arm64)

for arch in "${arches[@]}"; do
  debian_arch="$(field "arches.$arch.debian_arch")"
  want="$(field "arches.$arch.sha256")"
  want_deb="$(field "arches.$arch.deb_sha256")"
  out="$cache/nats-server-$version-$arch"
  if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$want" ]; then
    echo "fetch-sidecar: $arch: cached and verified ($out)" >&2
    continue
  fi
  # apt downloads a foreign architecture's package only once dpkg knows that architecture.
  if [ "$debian_arch" != "$native" ] && ! dpkg --print-foreign-architectures | grep -qx "$debian_arch"; then
    echo "fetch-sidecar: adding dpkg architecture $debian_arch so apt can download its package" >&2
    as_root dpkg --add-architecture "$debian_arch"
    as_root apt-get update -qq
  fi
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  # apt's sandbox user must be able to write where it downloads.
  chmod 0777 "$work"
  echo "fetch-sidecar: $arch: downloading $package:$debian_arch=$deb_version" >&2
  if ! (cd "$work" && apt-get download -qq "$package:$debian_arch=$deb_version" 2>/dev/null); then
    echo "fetch-sidecar: apt has no $package:$debian_arch=$deb_version (run 'apt-get update'; if Debian has moved on, re-pin appliance/sidecar.json)" >&2
    exit 1
  fi
  deb="$(ls "$work"/*.deb)"
  got_deb="$(sha256sum "$deb" | cut -d' ' -f1)"
  if [ "$got_deb" != "$want_deb" ]; then
    echo "fetch-sidecar: $arch: $(basename "$deb") has sha256 $got_deb, manifest pins $want_deb" >&2
    exit 1
  fi
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" "./$inner"
  got="$(sha256sum "$work/$inner" | cut -d' ' -f1)"
  if [ "$got" != "$want" ]; then
    echo "fetch-sidecar: $arch: $inner has sha256 $got, manifest pins $want" >&2
    exit 1
  fi
  install -m 0755 "$work/$inner" "$out.tmp"
  mv -f "$out.tmp" "$out"
  rm -rf "$work"
  trap - EXIT
  echo "fetch-sidecar: $arch: verified $out" >&2
done
