#!/usr/bin/env bash
# The README's main job: installs what is missing, builds, then runs a small PyTorch DDP
# training job (examples/train_ddp.py, gloo on CPU) through a coordinator and two ddp-client
# nodes x 2 workers on this machine. One worker fails on purpose at step 12 of the first
# generation; the coordinator restarts the whole group, the workers resume from the
# checkpoint and finish. The coordinator's dashboard is reachable while the demo runs (its URL is
# printed; DDP_DEMO_LINGER=SECONDS keeps it up that long after the job, to look around).
# Everything the demo starts is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh
echo "demo: building coordinator and ddp-client"
bazel build --config=release //coordinator //client/agent:ddp-client 2>&1 | tail -n 2

BIN=bazel-bin
WORK=$(mktemp -d -t ddp-demo.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "demo: starting the coordinator (state in $WORK/data/*.db)"
"$BIN/coordinator/coordinator" --port 0 --bind 127.0.0.1 --port-file "$WORK/port" \
  --http-port-file "$WORK/http_port" --data-dir "$WORK/data" 2> >(sed 's/^/[coordinator] /' >&2) &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
[ -s "$WORK/port" ] || { echo "demo: the coordinator did not start" >&2; exit 1; }
COORDINATOR="127.0.0.1:$(cat "$WORK/port")"
echo "demo: coordinator serving on $COORDINATOR"
for _ in $(seq 1 50); do [ -s "$WORK/http_port" ] && break; sleep 0.1; done
DASHBOARD="http://127.0.0.1:$(cat "$WORK/http_port")/"
echo "demo: dashboard at $DASHBOARD (live while the demo runs; metrics at ${DASHBOARD}metrics)"

# Two nodes, two workers each, one restart allowed; rank 1 exits 1 at step 12 of restart 0.
export PYTHON_EXEC=/usr/bin/python3
AGENTS=()
for node in node-a node-b; do
  "$BIN/client/agent/ddp-client" --coordinator "$COORDINATOR" --job demo --nnodes 2 \
    --nproc-per-node 2 --max-restarts 1 --node-id "$node" --local-addr 127.0.0.1 \
    --log-dir "$WORK/logs" \
    --rdzv-conf last_call_timeout=1 \
    examples/train_ddp.py --steps 30 --checkpoint-dir "$WORK" --result-dir "$WORK/results" \
    --fail-at-step 12 --fail-rank 1 --fail-exit-code 3 \
    2> >(sed "s/^/[$node] /" >&2) | sed "s/^/[$node] /" &
  AGENTS+=($!)
  PIDS+=($!)
done

# A watchdog bounds the demo: a healthy run takes well under a minute.
( sleep 300; echo "demo: FAILED: no result after 300 s" >&2; kill -TERM "${AGENTS[@]}" 2>/dev/null ) &
WATCHDOG=$!
status=0
for pid in "${AGENTS[@]}"; do wait "$pid" || status=$?; done
kill "$WATCHDOG" 2>/dev/null || true
if [ "$status" -ne 0 ]; then
  echo "demo: FAILED: an agent exited $status" >&2
  exit 1
fi

echo
echo "demo: both agents exited 0. Final parameters per rank:"
/usr/bin/python3 tools/demo_results.py "$WORK/results" || exit 1
echo "demo: OK: one worker failure, one group restart (TORCHELASTIC_RESTART_COUNT=1), identical parameters on every rank"
echo "demo: the job as the coordinator saw it: ${DASHBOARD}#/jobs/demo"
curl -sf "${DASHBOARD}v1/jobs/demo" >/dev/null && echo "demo: dashboard and REST API answered"
if [ "${DDP_DEMO_LINGER:-0}" -gt 0 ]; then
  echo "demo: keeping the dashboard up for ${DDP_DEMO_LINGER} s (DDP_DEMO_LINGER)"
  sleep "$DDP_DEMO_LINGER"
fi
