#!/usr/bin/env bash
# The REST API against the gRPC methods it maps onto, in one run on one coordinator:
# durable PUT and GET of one key per operation at 64 concurrent clients (p50/p99 and
# throughput per side), then the /metrics scrape of that coordinator.
# Usage: tools/bench_rest.sh [kv_bench flags, e.g. --duration 5s]
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //coordinator //tools/kv_bench 2>&1 | tail -n 1
work=$(mktemp -d -t ddp-bench-rest.XXXXXX)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')"
bazel-bin/coordinator/coordinator --port 0 --bind 127.0.0.1 --data-dir "$work/data" \
  --port-file "$work/port" --http-port-file "$work/http_port" --log-level warning \
  2>"$work/coordinator.log" &
pid=$!
for _ in $(seq 200); do [ -s "$work/http_port" ] && break; sleep 0.05; done
[ -s "$work/http_port" ] || { echo "bench_rest: coordinator did not start" >&2; exit 1; }
grpc="127.0.0.1:$(cat "$work/port")"
http="127.0.0.1:$(cat "$work/http_port")"
echo "coordinator gRPC $grpc, HTTP $http"
bazel-bin/tools/kv_bench/kv_bench --ddp "$grpc" --rest "$http" --ddp_pid "$pid" \
  --put_clients 64 --clients 64 --phases put,get "$@"
