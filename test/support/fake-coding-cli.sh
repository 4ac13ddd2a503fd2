#!/bin/sh
# fake-coding-cli.sh — a stand-in for a coding CLI in agent mode (`claude -p TASK`,
# `codex exec TASK`) for the sandbox tests: POSIX sh, no network of its own, no model.
#
#   fake-coding-cli.sh [any flags...] TASK
#
# TASK (the last argument) is a tiny script: steps separated by ';', run in order in the
# current directory (the box's work dir). It mirrors the twin's language (src/sandbox/twin.ts),
# so one conformance scenario runs on both.
#
#   print:TEXT         prints TEXT ($ANSWER replaced by the last answer)
#   ask:QUESTION       asks through crewlet-ask and waits; the answer becomes $ANSWER
#   write:FILE=TEXT    writes TEXT ($ANSWER replaced) and a newline to FILE
#   commit:MESSAGE     git add -A + git commit (a fixed identity, quiet)
#   sleep:SECONDS      sleeps
#   exit:N             exits with N at once
#   spin               burns CPU until something stops it
#   fill:MB            writes MB MiB of zeros to fill-<step>.bin
#   env:VAR            prints VAR=value, or "VAR is unset"
#   envnames           prints the names of every variable it was given, comma-separated
#   bg:SECONDS         leaves a background sleep running (a tree left behind)
#   net:PORT           tries 127.0.0.1:PORT, prints "net ok" or "net blocked"
#   touch:PATH         tries to create PATH, prints "wrote PATH" or "cannot write PATH"
#
# A step that fails ends the script with that step's exit status, as a CLI would fail.
set -u

for last in "$@"; do :; done
task="${last:-}"
ANSWER=""
n=0

# Replaces every literal $ANSWER in $1 (no sed: the answer may hold any character).
subst() {
  rest="$1"
  out=""
  while :; do
    case "$rest" in
      *'$ANSWER'*)
        out="$out${rest%%\$ANSWER*}$ANSWER"
        rest="${rest#*\$ANSWER}"
        ;;
      *) break ;;
    esac
  done
  printf '%s' "$out$rest"
}

run_step() {
  step="$1"
  case "$step" in
    print:*) printf '%s\n' "$(subst "${step#print:}")" ;;
    ask:*) ANSWER="$(crewlet-ask "${step#ask:}")" || return $? ;;
    write:*)
      spec="${step#write:}"
      file="${spec%%=*}"
      printf '%s\n' "$(subst "${spec#*=}")" > "$file" ;;
    commit:*)
      git -c user.name="Fake CLI" -c user.email=fake@example.invalid -c commit.gpgsign=false add -A &&
        git -c user.name="Fake CLI" -c user.email=fake@example.invalid -c commit.gpgsign=false \
          -c core.hooksPath=/dev/null commit -q -m "${step#commit:}" ;;
    sleep:*) sleep "${step#sleep:}" ;;
    exit:*) exit "${step#exit:}" ;;
    spin) while :; do :; done ;;
    fill:*) head -c "$((${step#fill:} * 1048576))" /dev/zero > "fill-$n.bin" ;;
    env:*)
      var="${step#env:}"
      if eval "[ \"\${$var+set}\" = set ]"; then eval "printf '%s=%s\n' \"\$var\" \"\$$var\""; else printf '%s is unset\n' "$var"; fi ;;
    envnames) env | sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)=.*/\1/p' | sort | tr '\n' ',' | sed 's/,$/\n/' ;;
    bg:*) sleep "${step#bg:}" > /dev/null 2>&1 & ;;
    net:*)
      if timeout 5 bash -c 'echo > "/dev/tcp/127.0.0.1/$1"' net "${step#net:}" 2>/dev/null; then echo "net ok"; else echo "net blocked"; fi ;;
    touch:*)
      p="${step#touch:}"
      if (: > "$p") 2>/dev/null; then echo "wrote $p"; else echo "cannot write $p"; fi ;;
    "") ;;
    *) echo "fake-coding-cli: unknown step: $step" >&2; return 2 ;;
  esac
}

# Split on ';' only, with no globbing of the steps.
set -f
old_ifs="$IFS"
IFS=';'
set -- $task
IFS="$old_ifs"
for step in "$@"; do
  n=$((n + 1))
  run_step "$step" || exit $?
done
exit 0
