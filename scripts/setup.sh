#!/usr/bin/env bash
# Installs what Crewlet needs on a fresh Debian machine with Node.js and npm, and nothing
# that is already there: the pinned Bun and libraries from npm, nats-server from Debian.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if [ ! -x node_modules/.bin/bun ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: installing npm packages (pinned by package-lock.json)" >&2
  npm ci --no-audit --no-fund --loglevel=error
fi

missing=()
if [ -z "${CREWLET_NATS_SERVER:-}" ] && ! command -v nats-server >/dev/null 2>&1 && [ ! -x /usr/sbin/nats-server ]; then
  missing+=(nats-server)
fi
# The tests drive the dashboard in headless Chromium, like a person would; starting the
# company does not need it.
if [ "${1:-}" = "--tests" ] && [ ! -x /usr/bin/chromium ]; then
  missing+=(chromium)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]} from Debian" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
