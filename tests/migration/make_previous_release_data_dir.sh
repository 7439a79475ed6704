#!/usr/bin/env bash
# How previous_release_data_dir/ (and expected/, the answers of that release
# to `ddpctl --json jobs list --all-runs`, `jobs get failed-twice [--run 1]`
# and `kv list ""` in both namespaces, heartbeatAgeMs removed) was made: a data dir written by the release
# before the single database (coordinator.db holding the KV tables only, the
# jobs in jobs.db), used by the migration tests. Kept for the record; it needs
# that release's coordinator binary (git show 0b73193, bazel build).
#
#   make_previous_release_data_dir.sh OLD_COORDINATOR DDP_CLIENT DDPCTL OUT_DIR
#
# Contents: KV keys in two namespaces (one deleted, one overwritten: history),
# job "failed-twice" (2 nodes, run 1 failed after a restart, then run 2
# failed too: a past run, failures with root causes, nodes), job "created"
# (made by the scheduler, no node yet), job "cancelled".
set -euo pipefail
coordinator=$1 client=$2 ddpctl=$3 out=$4
rm -rf "$out" && mkdir -p "$out"
"$coordinator" --port 0 --bind 127.0.0.1 --http-port -1 --data-dir "$out" \
  --port-file "$out.port" --log-level warning 2>"$out.log" &
pid=$!
for _ in $(seq 100); do [ -s "$out.port" ] && break; sleep 0.1; done
addr=127.0.0.1:$(cat "$out.port")
ctl() { "$ddpctl" --coordinator "$addr" "$@"; }
ctl kv put alpha 1 && ctl kv put beta two && ctl kv put alpha 3 && ctl kv del beta
ctl --namespace other kv put gamma "$(printf 'x%.0s' $(seq 100))"
ctl kv add counter 5
ctl jobs create created --nnodes 1:2
ctl jobs create cancelled --nnodes 2 && ctl jobs cancel cancelled --reason "for the fixture"
for run in 1 2; do
  clients=()
  for node in 0 1; do
    "$client" --coordinator "$addr" --job failed-twice --node-id "node$node" --nnodes 2 \
      --nproc-per-node 1 --max-restarts 1 --no-python -- /bin/sh -c 'sleep 0.3; exit 3' \
      >"$out.client$node.log" 2>&1 &
    clients+=($!)
  done
  for client_pid in "${clients[@]}"; do wait "$client_pid" || true; done
done
ctl jobs list --all-runs
kill -TERM "$pid"
wait "$pid"
rm -f "$out.port" "$out.log" "$out".client*.log "$out/LOCK"
