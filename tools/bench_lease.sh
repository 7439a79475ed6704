#!/usr/bin/env bash
# Lease benchmark: how long a coordinator restart takes as the agents see it, against the
# default lease (2 s = 2/3 of heartbeat_timeout 3 s): kill -9 of the coordinator, an immediate
# restart on the same data dir and port, until every agent logged "session resumed". Real
# coordinator, real ddp-client agents (workers: sleep). Prints every cycle, then min, median,
# max (see docs/benchmarks.md, "Leases").
#
# Usage: tools/bench_lease.sh [CYCLES (default 20)] [AGENTS (default 4)]
set -euo pipefail
cd "$(dirname "$0")/.."
cycles="${1:-20}"
agents="${2:-4}"
bazel build //coordinator //client/agent:ddp-client >&2
work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  [[ -n "${coordinator:-}" ]] && kill -9 "$coordinator" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
start_coordinator() {
  bazel-bin/coordinator/coordinator --bind 127.0.0.1 --port "$port" --http-port 0 \
    --data-dir "$work/data" >>"$work/coordinator.log" 2>&1 &
  coordinator=$!
}
start_coordinator
for i in $(seq 1 "$agents"); do
  bazel-bin/client/agent/ddp-client --coordinator "127.0.0.1:$port" --job lease-bench \
    --node-id "node-$i" --local-addr 127.0.0.1 --nnodes "$agents" --nproc-per-node 1 \
    --connect-timeout 30 --no-python /bin/sleep 100000 >"$work/agent-$i.log" 2>&1 &
  pids+=($!)
done
for i in $(seq 1 "$agents"); do
  until grep -q "starting 1 workers" "$work/agent-$i.log"; do sleep 0.05; done
done
echo "machine: $(nproc) cpus, $(lscpu | sed -n 's/^Model name: *//p'); $agents agents" >&2
times=()
for cycle in $(seq 1 "$cycles"); do
  before=()
  for i in $(seq 1 "$agents"); do before+=("$(grep -c 'session resumed' "$work/agent-$i.log" || true)"); done
  killed_at="$(date +%s.%N)"
  kill -9 "$coordinator"
  wait "$coordinator" 2>/dev/null || true
  start_coordinator
  for i in $(seq 1 "$agents"); do
    until [[ "$(grep -c 'session resumed' "$work/agent-$i.log" || true)" -gt "${before[$((i - 1))]}" ]]; do
      sleep 0.005
    done
  done
  done_at="$(date +%s.%N)"
  ms="$(python3 -c "print(round(($done_at - $killed_at) * 1000))")"
  times+=("$ms")
  echo "cycle $cycle: kill -9 -> every agent resumed in $ms ms"
  sleep 1
done
if grep -q "lease of generation" "$work"/agent-*.log; then
  echo "A LEASE RAN OUT: workers were stopped" >&2
fi
printf '%s\n' "${times[@]}" | sort -n | python3 -c '
import sys
v = [int(x) for x in sys.stdin]
print(f"kill -9 -> every agent resumed: min {v[0]} ms, median {v[len(v)//2]} ms, max {v[-1]} ms "
      f"over {len(v)} restarts; lease 2000 ms")'
restarts="$(grep -c 'starting 1 workers' "$work"/agent-*.log | awk -F: '{s += $2} END {print s}')"
echo "worker starts over the run: $restarts (one per agent means no worker restart)"
