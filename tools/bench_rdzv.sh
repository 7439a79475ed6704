#!/usr/bin/env bash
# Rendezvous benchmark: builds tools/rdzv_sim and the coordinator with the
# default configuration (never -c opt: it would invalidate the shared Bazel
# cache), then simulates 1,024, 4,096 and 16,384 node agents over real gRPC
# Session streams against a fresh coordinator per size and prints the table
# (see docs/benchmarks.md, section "Rendezvous").
#
# Usage: tools/bench_rdzv.sh [--standin] [rdzv_sim flags, e.g. --json]
#   --nodes 65536 --phase-timeout-s 120   the largest size (a later --nodes wins)
#   --standin  use //tools/rdzv_sim:standin_coordinator (SessionService and
#              JobService only) instead of //coordinator:coordinator
set -euo pipefail
cd "$(dirname "$0")/.."

target=//coordinator:coordinator
binary=bazel-bin/coordinator/coordinator
if [[ "${1:-}" == "--standin" ]]; then
  shift
  target=//tools/rdzv_sim:standin_coordinator
  binary=bazel-bin/tools/rdzv_sim/standin_coordinator
fi

bazel build //tools/rdzv_sim:rdzv_sim "${target}"
echo "machine: $(nproc) cpus, $(lscpu | sed -n 's/^Model name: *//p')" >&2
exec bazel-bin/tools/rdzv_sim/rdzv_sim --coordinator-binary "${binary}" \
  --nodes 1024,4096,16384 "$@"
