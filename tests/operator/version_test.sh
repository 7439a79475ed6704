#!/bin/bash
# Every binary a user runs prints one version with --version: the same one
# (common/version.h), which the coordinator also reports in /v1/kv:status, with
# the build mode.
set -euo pipefail
R="${TEST_SRCDIR}/ddp_coordinator"
WORK="${TEST_TMPDIR}/version"
mkdir -p "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }

line_re='^(coordinator|ddp-client|ddpctl) ([0-9]+\.[0-9]+\.[0-9]+) \((release|development) build\)$'
versions=()
for binary in coordinator/coordinator client/agent/ddp-client tools/ddpctl/ddpctl; do
  out="$("$R/$binary" --version)" || fail "$binary --version exited $?"
  [[ "$(printf '%s\n' "$out" | wc -l)" == 1 ]] || fail "$binary --version printed more than one line: $out"
  [[ "$out" =~ $line_re ]] || fail "$binary --version printed '$out'"
  versions+=("${BASH_REMATCH[2]} ${BASH_REMATCH[3]}")
done
[[ "${versions[0]}" == "${versions[1]}" && "${versions[1]}" == "${versions[2]}" ]] ||
  fail "the binaries disagree: ${versions[*]}"

# The running coordinator reports the same version in /v1/kv:status.
"$R/coordinator/coordinator" --port 0 --port-file "$WORK/port" --http-port-file "$WORK/http" \
  --data-dir "$WORK/data" 2>"$WORK/log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 300); do [[ -s "$WORK/http" ]] && break; sleep 0.1; done
[[ -s "$WORK/http" ]] || { cat "$WORK/log" >&2; fail "the coordinator did not start"; }
status="$(curl -sf "http://127.0.0.1:$(cat "$WORK/http")/v1/kv:status")"
version="${versions[0]%% *}"
[[ "$status" == *"\"version\":\"ddp-coordinator $version\""* ]] ||
  fail "/v1/kv:status does not report $version: $status"
echo "PASS: ${versions[0]}"
