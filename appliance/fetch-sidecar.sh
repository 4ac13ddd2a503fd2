#!/usr/bin/env bash
# Builds the pinned nats-server from its official Go module for each architecture and
# leaves it in appliance/cache/nats-server-<version>-<arch>, checked against the sha256
# appliance/sidecar.json pins. The Go toolchain verifies the module and its dependencies
# against their go.sum and the checksum database (GOSUMDB, as configured on the machine);
# the pin then covers the binary itself. A binary already cached and matching its pin is
# not built again.
#
# Reproducible: the toolchain is pinned too (GOTOOLCHAIN=<go_toolchain>; Go fetches that
# release through the module proxy when the installed one differs), and -trimpath,
# CGO_ENABLED=0, GOAMD64/GOARM64 and empty GOFLAGS/GOEXPERIMENT fix everything else that
# reaches the bytes, so any machine with Go >= 1.21 builds the same hash.
#
#   usage: appliance/fetch-sidecar.sh [--previous] [--print] [x64|arm64 ...]   (default: both)
#     --previous  the `previous` entry (the older server the mixed-version test runs)
#     --print     build, print the sha256 (to re-pin) and cache nothing
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
manifest="$here/sidecar.json"
cache="$here/cache"

entry=""
print=0
arches=()
for a in "$@"; do
  case "$a" in
    --previous) entry="previous." ;;
    --print) print=1 ;;
    x64 | arm64) arches+=("$a") ;;
    *) echo "fetch-sidecar: unknown argument $a (expected --previous, --print, x64 or arm64)" >&2; exit 2 ;;
  esac
done
[ ${#arches[@]} -eq 0 ] && arches=(x64 arm64)

field() { node -e 'const m=require(process.argv[1]); let v=m; for (const k of process.argv[2].split(".")) v=v?.[k]; if (v === undefined) { console.error(`sidecar.json: no field ${process.argv[2]}`); process.exit(1) } process.stdout.write(String(v))' "$manifest" "$1"; }

module="$(field module)"
version="$(field "${entry}version")"
toolchain="$(field "${entry}go_toolchain")"

go_bin="$(command -v go || true)"
[ -z "$go_bin" ] && [ -x /usr/local/go/bin/go ] && go_bin=/usr/local/go/bin/go
mkdir -p "$cache"

for arch in "${arches[@]}"; do
  goarch="$(field "arches.$arch.goarch")"
  want="$(field "${entry}arches.$arch.sha256")"
  out="$cache/nats-server-$version-$arch"
  if [ "$print" = 0 ] && [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$want" ]; then
    echo "fetch-sidecar: $arch: $version cached and verified ($out)" >&2
    continue
  fi
  if [ -z "$go_bin" ]; then
    echo "fetch-sidecar: Go is needed to build nats-server $version (install it from https://go.dev/dl/ or your distribution, then run this again)" >&2
    exit 1
  fi
  work="$(mktemp -d)"
  cleanup() { rm -rf "$work"; }
  trap cleanup EXIT
  echo "fetch-sidecar: $arch: building $module@v$version with $toolchain (linux/$goarch)" >&2
  # GOPATH is a scratch dir so `go install` puts a cross-compiled binary in bin/linux_<arch>
  # (it refuses GOBIN for those); the module cache stays the machine's own.
  (
    cd "$work"
    env -u GOBIN \
      GOPATH="$work/gopath" GOMODCACHE="$("$go_bin" env GOMODCACHE)" \
      GOTOOLCHAIN="$toolchain" GOFLAGS= GOEXPERIMENT= \
      CGO_ENABLED=0 GOOS=linux GOARCH="$goarch" GOAMD64=v1 GOARM64=v8.0 \
      "$go_bin" install -trimpath -buildvcs=false -ldflags="-s -w" "$module@v$version"
  )
  built="$work/gopath/bin/nats-server"
  [ -f "$built" ] || built="$work/gopath/bin/linux_$goarch/nats-server"
  got="$(sha256sum "$built" | cut -d' ' -f1)"
  if [ "$print" = 1 ]; then
    echo "$arch $version $got"
    cleanup
    trap - EXIT
    continue
  fi
  if [ "$got" != "$want" ]; then
    echo "fetch-sidecar: $arch: built nats-server $version has sha256 $got; appliance/sidecar.json pins $want" >&2
    exit 1
  fi
  install -m 0755 "$built" "$out.tmp.$$"
  mv -f "$out.tmp.$$" "$out"
  cleanup
  trap - EXIT
  echo "fetch-sidecar: $arch: verified $out" >&2
done
