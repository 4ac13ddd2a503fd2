#!/usr/bin/env bash
# Installs what Crewlet needs on a fresh Debian machine with Node.js, npm and Go, and nothing
# that is already there: the pinned Bun and libraries from npm, and the pinned nats-server
# built from its Go module into appliance/cache (the same bytes the compiled binaries
# embed; appliance/fetch-sidecar.sh checks them against appliance/sidecar.json).
# CREWLET_NATS_SERVER, when set, names another nats-server and skips that build.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if [ ! -x node_modules/.bin/bun ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: installing npm packages (pinned by package-lock.json)" >&2
  npm ci --no-audit --no-fund --loglevel=error
fi

case "$(uname -m)" in
  x86_64 | amd64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "setup: unsupported machine $(uname -m): Crewlet runs on linux x64 and arm64" >&2; exit 1 ;;
esac
if [ -z "${CREWLET_NATS_SERVER:-}" ]; then
  bash appliance/fetch-sidecar.sh "$arch"
fi
# The rolling-upgrade test runs one member on the previous release beside the current one.
if [ "${1:-}" = "--tests" ]; then
  bash appliance/fetch-sidecar.sh --previous "$arch"
fi

# The tests drive the dashboard in headless Chromium, like a person would; starting the
# company does not need it.
if [ "${1:-}" = "--tests" ] && [ ! -x /usr/bin/chromium ]; then
  echo "setup: installing chromium from Debian" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

# Coding runs are isolated with bubblewrap; the tests run real boxes. Starting the company
# does not need it (its file configures no sandbox; one that asks for bwrap is refused at
# validate, naming the setting).
if [ "${1:-}" = "--tests" ] && ! command -v bwrap >/dev/null 2>&1; then
  echo "setup: installing bubblewrap from Debian" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
fi
