#!/usr/bin/env bash
# Launch and restart times: ddp-client vs the real torchrun (PyTorch 1.13,
# /usr/bin/torchrun), side by side in one run. Builds the coordinator and
# ddp-client (default config: the shared cache), then runs
# tools/bench_launch/bench_launch.py under /usr/bin/python3 (torchrun's
# interpreter; standard library only). Method and figures: docs/benchmarks.md,
# section "Launch and restart vs torchrun".
#
#   tools/bench_launch.sh [bench_launch.py flags, e.g. --nodes 2 --repeat 3 --json]
# Exit 1 if the build or any trial fails.
set -euo pipefail
cd "$(dirname "$0")/.."

[ -x /usr/bin/torchrun ] || { echo "bench_launch: /usr/bin/torchrun missing (apt-get install python3-torch)" >&2; exit 1; }
bazel build //coordinator:coordinator //client/agent:ddp-client >/dev/null 2>&1 ||
  { echo "bench_launch: bazel build failed" >&2; exit 1; }
exec /usr/bin/python3 tools/bench_launch/bench_launch.py "$@"
