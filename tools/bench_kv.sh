#!/usr/bin/env bash
# KV benchmark: the ddp coordinator and etcd 3.4 side by side on this machine.
# Starts a coordinator (temp data dir, --port 0 + port file, HTTP and its metrics
# on as by default, on any free port) and an etcd (temp
# data dir, loopback client URL on a free port, default fsync behaviour), runs
# //tools/kv_bench against both (each server's CPU per operation comes from
# /proc/PID/stat), stops both, and prints the tables plus the cost of one
# fsync'd 4 KiB write on the same disk (dd oflag=dsync).
#
#   tools/bench_kv.sh [extra kv_bench flags, e.g. --duration 5s]
#
# On this shared machine the load from other work drifts within a run, so a
# comparison is only fair when the systems take turns: ROUNDS=N runs N rounds,
# each measuring ddp then etcd (the same two servers throughout), and prints
# the load average before each round. BASELINE=PATH adds a second coordinator
# binary (e.g. one built from main) measured in the same turns, after ddp.
#   ROUNDS=3 BASELINE=/tmp/coordinator.main tools/bench_kv.sh --phases put,watch
# Needs /usr/bin/etcd (Debian's etcd-server). Exit 1 if anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."

bazel build //coordinator:coordinator //tools/kv_bench:kv_bench >/dev/null 2>&1 ||
  { echo "bench_kv: bazel build failed" >&2; exit 1; }
coordinator="$PWD/bazel-bin/coordinator/coordinator"
kv_bench="$PWD/bazel-bin/tools/kv_bench/kv_bench"
etcd=/usr/bin/etcd
[ -x "$etcd" ] || { echo "bench_kv: $etcd missing (apt-get install etcd-server)" >&2; exit 1; }

work=$(mktemp -d -t ddp-bench-kv.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), data on $(df --output=source,fstype "$work" | tail -1)"
echo -n "one fsync'd 4 KiB write (dd oflag=dsync, 500 writes): "
dd if=/dev/zero of="$work/fsync-probe" bs=4k count=500 oflag=dsync 2>&1 |
  awk '/copied/ { printf "%.3f ms per write\n", $(NF-3) * 1000 / 500 }' || true
rm -f "$work/fsync-probe"

rounds=${ROUNDS:-1}
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench_kv: ROUNDS='$rounds' must be a positive integer" >&2; exit 1; }
baseline=${BASELINE:-}
[ -z "$baseline" ] || [ -x "$baseline" ] ||
  { echo "bench_kv: BASELINE='$baseline' is not an executable coordinator binary" >&2; exit 1; }

# start_coordinator BINARY NAME: starts it on a free port; sets started_pid.
start_coordinator() {
  "$1" --port 0 --http-port -1 --bind 127.0.0.1 --data-dir "$work/$2" \
    --port-file "$work/$2.port" --log-level warning 2>"$work/$2.log" &
  started_pid=$!
  pids+=($started_pid)
  for _ in $(seq 200); do [ -s "$work/$2.port" ] && break; sleep 0.05; done
  [ -s "$work/$2.port" ] || { echo "bench_kv: coordinator $1 did not start" >&2; cat "$work/$2.log" >&2; exit 1; }
}
start_coordinator "$coordinator" ddp
ddp_pid=$started_pid
if [ -n "$baseline" ]; then
  start_coordinator "$baseline" baseline
  baseline_pid=$started_pid
fi
client_port=$(free_port)
peer_port=$(free_port)
"$etcd" --data-dir "$work/etcd" --name bench \
  --listen-client-urls "http://127.0.0.1:$client_port" \
  --advertise-client-urls "http://127.0.0.1:$client_port" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "bench=http://127.0.0.1:$peer_port" \
  --log-level warn 2>"$work/etcd.log" &
etcd_pid=$!
pids+=($etcd_pid)

for _ in $(seq 200); do
  ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$client_port" endpoint health >/dev/null 2>&1 && break
  sleep 0.1
done
echo "coordinator at 127.0.0.1:$(cat "$work/ddp.port"); $("$etcd" --version | head -1) at 127.0.0.1:$client_port"

# The PIDs let kv_bench report the server's CPU per operation next to its own.
# A failed phase is reported in its table and fails the script at the end; the
# other systems and rounds still run.
failed=0
for round in $(seq "$rounds"); do
  [ "$rounds" -eq 1 ] || echo "== round $round of $rounds, load average $(cut -d' ' -f1-3 /proc/loadavg) =="
  "$kv_bench" --ddp "127.0.0.1:$(cat "$work/ddp.port")" --ddp_pid "$ddp_pid" "$@" || failed=1
  if [ -n "$baseline" ]; then
    echo "(baseline: $baseline)"
    "$kv_bench" --ddp "127.0.0.1:$(cat "$work/baseline.port")" --ddp_pid "$baseline_pid" "$@" |
      sed 's/^== ddp ==$/== ddp baseline ==/' || failed=1
  fi
  "$kv_bench" --etcd "127.0.0.1:$client_port" --etcd_pid "$etcd_pid" "$@" || failed=1
done
exit "$failed"
