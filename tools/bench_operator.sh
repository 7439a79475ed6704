#!/usr/bin/env bash
# Operator-surface figures on this machine:
#  1. GET /metrics with 4,096 simulated agents connected (tools/rdzv_sim): time per scrape
#     (curl, back to back) and the coordinator's CPU per scrape (its CPU while scraping minus
#     its heartbeat-only CPU rate over the same time);
#  2. the dashboard's job page of a 1,024-node job: time to first render in headless Chromium.
# Usage: tools/bench_operator.sh [SCRAPES]
set -euo pipefail
cd "$(dirname "$0")/.."
scrapes="${1:-20}"
bazel build //coordinator //tools/rdzv_sim 2>&1 | tail -n 1
work=$(mktemp -d -t ddp-bench-op.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')"
bazel-bin/coordinator/coordinator --port 0 --bind 127.0.0.1 --data-dir "$work/data" \
  --port-file "$work/port" --http-port-file "$work/http_port" --log-level warning \
  2>"$work/coordinator.log" &
coordinator=$!
pids+=($coordinator)
for _ in $(seq 200); do [ -s "$work/http_port" ] && break; sleep 0.05; done
grpc="127.0.0.1:$(cat "$work/port")"
http="http://127.0.0.1:$(cat "$work/http_port")"

wait_agents() {  # N: until the scrape shows N connected agents
  for _ in $(seq 600); do
    grep -q "^ddp_agents_connected $1\$" <<<"$(curl -sf "$http/metrics")" && return 0
    sleep 0.2
  done
  echo "bench_operator: $1 agents never connected" >&2
  return 1
}

sim() {  # NODES SECONDS
  bazel-bin/tools/rdzv_sim/rdzv_sim --coordinator "$grpc" --coordinator-pid "$coordinator" \
    --nodes "$1" --heartbeat-seconds "$2" --work-dir "$work" >"$work/sim-$1.txt" 2>&1 &
  pids+=($!)
}

sim 4096 60
wait_agents 4096
sleep 2
t0=$(cpu_ticks "$coordinator"); s0=$(date +%s.%N)
sleep 5
t1=$(cpu_ticks "$coordinator"); s1=$(date +%s.%N)
: >"$work/scrape_times"
for _ in $(seq "$scrapes"); do
  curl -s -o "$work/scrape.txt" -w '%{time_total}\n' "$http/metrics" >>"$work/scrape_times"
done
t2=$(cpu_ticks "$coordinator"); s2=$(date +%s.%N)
sort -n "$work/scrape_times" | awk -v n="$scrapes" -v t0="$t0" -v t1="$t1" -v t2="$t2" \
  -v s0="$s0" -v s1="$s1" -v s2="$s2" -v hz="$hz" -v bytes="$(wc -c <"$work/scrape.txt")" '
  { t[NR] = $1 * 1000 }
  END {
    base = (t1 - t0) / (s1 - s0); used = t2 - t1; span = s2 - s1
    printf "/metrics with 4096 agents connected: %d scrapes of %d bytes: min %.1f ms, median %.1f ms, max %.1f ms\n",
      n, bytes, t[1], t[int((n + 1) / 2)], t[n]
    printf "coordinator CPU per scrape: %.1f ms (%.0f ms while scraping, minus %.0f ms/s of heartbeat load)\n",
      (used - base * span) * 1000 / hz / n, used * 1000 / hz, base * 1000 / hz
  }'
grep -c '^ddp_' "$work/scrape.txt" | xargs echo "samples in one scrape:"
kill "${pids[-1]}" 2>/dev/null || true
wait "${pids[-1]}" 2>/dev/null || true
sleep 5  # the 4096 agents' job is lost or finished

sim 1024 60
job=""
for _ in $(seq 600); do
  job=$(curl -sf "$http/v1/jobs?states=RUNNING" | { grep -o '"jobId":"rdzv-sim-n1024[^"]*"' || true; } |
    head -1 | cut -d'"' -f4)
  [ -n "$job" ] && break
  sleep 0.2
done
[ -n "$job" ] || { echo "bench_operator: no running 1024-node job" >&2; exit 1; }
/usr/bin/python3 tools/cdp/bench_dashboard.py "$http/#/jobs/$job" 1024 --runs 5
