#!/usr/bin/env bash
# Lets this x86_64 machine execute aarch64 programs the way a Raspberry Pi's kernel does:
# qemu-user-static and the aarch64 loader from Debian, binfmt_misc mounted, and the
# aarch64 handler registered with the F flag (the interpreter opened at registration).
# qemu-user alone is not enough for Crewlet: it emulates the node, but the node's own child,
# the arm64 nats-server, is exec'd by the real kernel and refused without a handler.
# Needs root or sudo. Idempotent: each step only does what is missing.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if [ "$(uname -m)" = aarch64 ]; then
  echo "qemu-binfmt: this kernel runs aarch64 itself; nothing to do" >&2
  exit 0
fi

# Debian's qemu-user-static ships the handler line for systemd-binfmt in binfmt.d.
CONF=/usr/lib/binfmt.d/qemu-aarch64.conf
if ! command -v qemu-aarch64-static >/dev/null 2>&1 || [ ! -d /usr/aarch64-linux-gnu ] || [ ! -f "$CONF" ]; then
  echo "qemu-binfmt: installing qemu-user-static and libc6-arm64-cross" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user-static libc6-arm64-cross >/dev/null
fi

BINFMT=/proc/sys/fs/binfmt_misc
if ! mountpoint -q "$BINFMT"; then
  echo "qemu-binfmt: mounting binfmt_misc" >&2
  as_root mount -t binfmt_misc binfmt_misc "$BINFMT"
fi
if [ ! -e "$BINFMT/qemu-aarch64" ]; then
  echo "qemu-binfmt: registering $(cut -d: -f2 "$CONF") from $CONF" >&2
  as_root sh -c "cat '$CONF' > '$BINFMT/register'"
fi
# A handler left disabled (pi-smoke.ts disables it for a moment) is enabled again.
if ! head -1 "$BINFMT/qemu-aarch64" | grep -qx enabled; then
  as_root sh -c "echo 1 > '$BINFMT/qemu-aarch64'"
fi
echo "qemu-binfmt: $(head -1 "$BINFMT/qemu-aarch64"), $(grep ^interpreter "$BINFMT/qemu-aarch64"), $(grep ^flags "$BINFMT/qemu-aarch64")" >&2
