#!/usr/bin/env bash
# usage: bash scripts/systemd-trial.sh [OLD_BINARY [NEW_BINARY]]   (root; ~4 min)
#
# appliance/crewlet.service tried the way a person installs it, under a real systemd as PID 1:
# this machine's own root filesystem, overlaid on a tmpfs (nothing it writes reaches the
# host), booted with systemd-nspawn on a private network. CI boxes and this one run without
# systemd as PID 1, where systemctl cannot work at all; Debian 12's systemd 252 is the one
# Raspberry Pi OS (bookworm) ships. In the box: appliance/INSTALL.md's one-box steps, then
# enable --now, /ready and an @ceo turn, kill -9 (Restart= brings it back), a binary swap
# (OLD_BINARY installed first, NEW_BINARY swapped in, restart), a reboot of the box (the
# unit starts at boot), a stop; the journal must carry the node's event names. Each step
# prints how long it took; any failure exits 1. Defaults: both binaries are this machine's
# dist/crewlet-linux-<arch> (build it first).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT_DIR=$(pwd)

case "$(uname -m)" in x86_64) ARCH=x64 ;; aarch64) ARCH=arm64 ;; *) echo "systemd-trial: unsupported machine" >&2; exit 1 ;; esac
OLD=$(realpath "${1:-dist/crewlet-linux-$ARCH}")
NEW=$(realpath "${2:-dist/crewlet-linux-$ARCH}")
for b in "$OLD" "$NEW"; do [ -x "$b" ] || { echo "systemd-trial: $b is not built (bun run build.ts)" >&2; exit 1; }; done
[ "$(id -u)" = 0 ] || { echo "systemd-trial: needs root (mounts, systemd-nspawn)" >&2; exit 1; }
if ! command -v systemd-nspawn >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd-container >/dev/null
fi

ms() { date +%s%3N; }
T_ALL=$(ms)
step_log() { echo "$(date -u +%FT%T.%3NZ) INFO  systemd_trial_step step=$1 took_ms=$(($(ms) - $2))${3:+ $3}" >&2; }
fail() {
  echo "$(date -u +%FT%T.%3NZ) ERROR systemd_trial_failed error=\"$*\"" >&2
  [ -n "${LEADER:-}" ] && in_box journalctl -u crewlet --no-pager -n 40 >&2 || true
  exit 1
}

MNT=$(mktemp -d /tmp/crewlet-systemd-trial-XXXXXX)
BOX=$MNT/root
LEADER=""
NSPAWN_PID=""
teardown() {
  if [ -n "$NSPAWN_PID" ] && kill -0 "$NSPAWN_PID" 2>/dev/null; then
    [ -n "$LEADER" ] && nsenter -t "$LEADER" -a systemctl poweroff --no-block >/dev/null 2>&1 || true
    for _ in $(seq 1 60); do kill -0 "$NSPAWN_PID" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$NSPAWN_PID" 2>/dev/null || true
  fi
  umount "$BOX" 2>/dev/null || umount -l "$BOX" 2>/dev/null || true
  umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
  rmdir "$MNT" 2>/dev/null || true
}
trap teardown EXIT

# The host's root read-only underneath, the box's writes in memory. The lower layer is the
# root filesystem alone (an overlay does not descend into other mounts).
mount -t tmpfs -o size=4g tmpfs "$MNT"
mkdir -p "$MNT/upper" "$MNT/work" "$BOX"
mount -t overlay overlay -o "lowerdir=/,upperdir=$MNT/upper,workdir=$MNT/work" "$BOX"
# Its own machine id (a copy of the host's makes nspawn refuse to link journals).
rm -f "$BOX/etc/machine-id"
# A private network never comes online, so networkd's wait-online would hold
# network-online.target (and the unit's After=) for its 2-minute timeout at every boot;
# seen on the first try. A Pi's NetworkManager reaches online, or times out the same way.
ln -sf /dev/null "$BOX/etc/systemd/system/systemd-networkd-wait-online.service"
# binfmt_misc is the kernel's, shared with the host: the box's systemd-binfmt would register
# every handler its packages ship (seen: all of qemu's, jar, python) on the host too, and so
# would binfmt-support.
for u in systemd-binfmt.service binfmt-support.service; do ln -sf /dev/null "$BOX/etc/systemd/system/$u"; done
mkdir -p "$BOX/root/pi"
cp "$OLD" "$BOX/root/pi/crewlet-old"
cp "$NEW" "$BOX/root/pi/crewlet-new"
cp appliance/crewlet.service crewlet.yaml appliance/INSTALL.md "$BOX/root/pi/"

boot_box() {
  setsid systemd-nspawn -D "$BOX" --private-network --register=no --keep-unit -M crewlet-trial -b --console=passive \
    >>"$MNT/nspawn.log" 2>&1 &
  NSPAWN_PID=$!
  LEADER=""
  for _ in $(seq 1 240); do
    LEADER=$(pgrep -P "$NSPAWN_PID" -x systemd || true)
    if [ -n "$LEADER" ]; then
      state=$(nsenter -t "$LEADER" -a systemctl is-system-running 2>/dev/null || true)
      case "$state" in running | degraded) return 0 ;; esac
    fi
    sleep 0.5
  done
  cat "$MNT/nspawn.log" >&2
  fail "the box's systemd did not reach running (state: ${state:-none})"
}
in_box() { nsenter -t "$LEADER" -a "$@"; }
main_pid() { in_box systemctl show -p MainPID --value crewlet; }
api() { in_box curl -sf -m 10 -H "authorization: Bearer $(in_box cat /var/lib/crewlet/api-token)" "$@"; }
wait_ready() {
  for _ in $(seq 1 600); do
    in_box curl -sf -m 2 -o /dev/null http://127.0.0.1:7700/ready && return 0
    sleep 0.2
  done
  fail "GET /ready did not answer 200 within 120 s"
}
ceo_replies_to() {
  api "http://127.0.0.1:7700/chat/channels/general/messages?order=newest&limit=200" |
    jq --arg id "$1" '[.messages[] | select(.thread_parent == $id and .author == "ceo")] | length'
}

t=$(ms)
boot_box
step_log boot_box "$t" "systemd=\"$(in_box systemctl --version | head -1)\""

# appliance/INSTALL.md's "One box", as written, from the binary's directory.
t=$(ms)
in_box bash -euxc '
  cd /root/pi
  cp crewlet-old crewlet-linux-'"$ARCH"'
  install -m 0755 crewlet-linux-$(dpkg --print-architecture | sed "s/amd64/x64/") /usr/local/bin/crewlet
  useradd --system --home /var/lib/crewlet --shell /usr/sbin/nologin crewlet
  install -d -m 0755 /etc/crewlet
  sed "s|dir: \"\${CREWLET_STORE:-.crewlet}\"|dir: /var/lib/crewlet|" crewlet.yaml > crewlet.box.yaml
  grep -q "dir: /var/lib/crewlet" crewlet.box.yaml
  install -m 0640 -g crewlet crewlet.box.yaml /etc/crewlet/crewlet.yaml
  crewlet validate /etc/crewlet/crewlet.yaml
  install -m 0644 crewlet.service /etc/systemd/system/crewlet.service
  systemctl daemon-reload && systemctl enable --now crewlet
' >"$MNT/install.log" 2>&1 || { cat "$MNT/install.log" >&2; fail "the install steps failed"; }
wait_ready
step_log install_enable_start "$t" "main_pid=$(main_pid) enabled=$(in_box systemctl is-enabled crewlet)"

# systemd's own reading of the unit, where the binary it names exists.
in_box systemd-analyze verify /etc/systemd/system/crewlet.service >"$MNT/verify.log" 2>&1 || { cat "$MNT/verify.log" >&2; fail "systemd-analyze verify refused the unit"; }
[ ! -s "$MNT/verify.log" ] || { cat "$MNT/verify.log" >&2; fail "systemd-analyze verify warned about the unit"; }
echo "  $(in_box systemd-analyze security crewlet --no-pager 2>/dev/null | tail -1)" >&2

PID1=$(main_pid)
[ "$(in_box ps -o user= -p "$PID1")" = crewlet ] || fail "the node does not run as the crewlet user"
[ "$(in_box stat -c '%U %a' /var/lib/crewlet)" = "crewlet 700" ] || fail "/var/lib/crewlet is not crewlet's, mode 0700: $(in_box stat -c '%U %a' /var/lib/crewlet)"
in_box test -f /var/lib/crewlet/estate.db || fail "no estate.db in /var/lib/crewlet"

t=$(ms)
MSG=$(api -H 'content-type: application/json' -d '{"body":"@ceo please make a plan for the Pi","author":"founder"}' \
  http://127.0.0.1:7700/chat/channels/general/messages | jq -r .message_id)
for _ in $(seq 1 300); do [ "$(ceo_replies_to "$MSG")" -ge 1 ] && break; sleep 0.2; done
[ "$(ceo_replies_to "$MSG")" -ge 1 ] || fail "@ceo did not answer in #general"
step_log ceo_reply "$t"

t=$(ms)
SIDECAR1=$(in_box pgrep -P "$PID1" || true)
in_box kill -9 "$PID1"
for _ in $(seq 1 300); do p=$(main_pid); [ "$p" != 0 ] && [ "$p" != "$PID1" ] && break; sleep 0.2; done
PID2=$(main_pid)
[ "$PID2" != 0 ] && [ "$PID2" != "$PID1" ] || fail "after kill -9 systemd did not start the node again"
wait_ready
[ -z "$SIDECAR1" ] || ! in_box kill -0 "$SIDECAR1" 2>/dev/null || fail "the killed node's sidecar $SIDECAR1 outlived it"
[ "$(ceo_replies_to "$MSG")" -ge 1 ] || fail "after kill -9 the reply is gone"
step_log kill9_restart "$t" "old_pid=$PID1 new_pid=$PID2 restarts=$(in_box systemctl show -p NRestarts --value crewlet)"

# The swap: install writes a new file (the running one keeps its inode), then a restart.
t=$(ms)
in_box install -m 0755 /root/pi/crewlet-new /usr/local/bin/crewlet
in_box systemctl restart crewlet
wait_ready
PID3=$(main_pid)
want=$(sha256sum "$NEW" | cut -d' ' -f1)
got=$(in_box sha256sum "/proc/$PID3/exe" | cut -d' ' -f1)
[ "$got" = "$want" ] || fail "after the swap the node runs $got, not the new binary $want"
in_box journalctl -u crewlet -o cat --no-pager | grep -q 'node_stopped .*code=0 reason=SIGTERM' || fail "the swapped-out node did not log a clean node_stopped"
[ "$(ceo_replies_to "$MSG")" -ge 1 ] || fail "after the swap the reply is gone"
step_log binary_swap "$t" "new_pid=$PID3 exe_sha256=${got:0:16}"

t=$(ms)
in_box systemctl reboot --no-block || true
for _ in $(seq 1 240); do kill -0 "$NSPAWN_PID" 2>/dev/null || break; sleep 0.5; done
! kill -0 "$NSPAWN_PID" 2>/dev/null || fail "the box did not go down for its reboot"
boot_box
wait_ready
[ "$(ceo_replies_to "$MSG")" -ge 1 ] || fail "after the reboot the reply is gone"
step_log reboot "$t" "active=$(in_box systemctl is-active crewlet) boots_in_journal=$(in_box journalctl --list-boots --no-pager | tail -n +2 | wc -l)"

# Informative, not judged here: can a seat's bwrap sandbox (src/sandbox) start under the
# unit's own sandboxing? The same unit, its ExecStart swapped for one bwrap run.
if in_box test -x /usr/bin/bwrap; then
  in_box sh -c "sed -e 's|^ExecStart=.*|ExecStart=/usr/bin/bwrap --unshare-all --die-with-parent --ro-bind / / --proc /proc --dev /dev /bin/true|' \
    -e 's|^Type=simple|Type=oneshot|' -e '/^Restart/d' /etc/systemd/system/crewlet.service > /etc/systemd/system/crewlet-bwrap-probe.service && systemctl daemon-reload"
  if in_box systemctl start crewlet-bwrap-probe.service 2>/dev/null; then bwrap_said=ran; else bwrap_said="refused: $(in_box journalctl -u crewlet-bwrap-probe -o cat --no-pager | grep -i bwrap | tail -1)"; fi
  echo "  bwrap under the unit's sandboxing: $bwrap_said" >&2
fi

t=$(ms)
in_box systemctl stop crewlet
[ "$(in_box systemctl show -p Result --value crewlet)" = success ] || fail "systemctl stop: the unit's result is not success"
step_log stop "$t" "result=success"

# The journal carries the node's own event names, from every boot.
events=$(in_box journalctl -u crewlet -o cat --no-pager)
for e in nats_sidecar_ready api_listening node_ready seat_attached node_stopping node_stopped; do
  n=$(grep -c " $e " <<<"$events" || true)
  [ "$n" -ge 1 ] || fail "the journal has no $e line"
  echo "  journal: $e × $n" >&2
done
echo "$(date -u +%FT%T.%3NZ) INFO  systemd_trial_passed took_ms=$(($(ms) - T_ALL))" >&2
