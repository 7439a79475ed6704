#!/usr/bin/env bash
# Before/after benchmark of two coordinator builds on this machine, in one
# run, alternating A and B each round so drift hits both alike:
#   KV: kv_bench put at 1, 16 and 256 clients, get, add, watch fan-out
#       (a fresh coordinator per round and build, temp data dir);
#   rendezvous: rdzv_sim at 1,024 and 4,096 nodes (a fresh coordinator per
#       size, started by rdzv_sim).
# Each build dir holds its own coordinator, kv_bench and rdzv_sim binaries
# (copied from bazel-bin at the commit measured), so each build is driven by
# the tools of its own tree.
#
#   tools/bench_before_after.sh BEFORE_DIR AFTER_DIR [ROUNDS=3] [KV_DURATION=3s]
# Prints the raw tables, labelled "== <build> round <n> ==".
set -euo pipefail
before=$1 after=$2 rounds=${3:-3} duration=${4:-3s}
for dir in "$before" "$after"; do
  for tool in coordinator kv_bench rdzv_sim; do
    [ -x "$dir/$tool" ] || { echo "bench_before_after: $dir/$tool missing" >&2; exit 1; }
  done
done
work=$(mktemp -d -t ddp-ab.XXXXXX)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')"

kv_round() {  # kv_round BUILD_DIR
  rm -rf "$work/data" "$work/port"
  "$1/coordinator" --port 0 --bind 127.0.0.1 --http-port -1 --data-dir "$work/data" \
    --port-file "$work/port" --log-level warning 2>"$work/coordinator.log" &
  pid=$!
  for _ in $(seq 200); do [ -s "$work/port" ] && break; sleep 0.05; done
  "$1/kv_bench" --ddp "127.0.0.1:$(cat "$work/port")" --ddp_pid "$pid" \
    --put_clients 1,16,256 --duration "$duration" 2>&1 | sed -n '/^phase/,$p'
  kill "$pid"; wait "$pid" || true; pid=""
}

rdzv_round() {  # rdzv_round BUILD_DIR
  "$1/rdzv_sim" --coordinator_binary "$1/coordinator" --nodes 1024,4096 \
    --work_dir "$work" 2>/dev/null
}

for round in $(seq "$rounds"); do
  for build in "$before" "$after"; do
    echo "== $(basename "$build") round $round: kv =="
    kv_round "$build"
    echo "== $(basename "$build") round $round: rendezvous =="
    rdzv_round "$build"
  done
done
