#!/usr/bin/env bash
# KV benchmark: the ddp coordinator and etcd 3.4 side by side on this machine.
# Starts a coordinator (temp data dir, --port 0 + port file) and an etcd (temp
# data dir, loopback client URL on a free port, default fsync behaviour), runs
# //tools/kv_bench against both (each server's CPU per operation comes from
# /proc/PID/stat), stops both, and prints the tables plus the cost of one
# fsync'd 4 KiB write on the same disk (dd oflag=dsync).
#
#   tools/bench_kv.sh [extra kv_bench flags, e.g. --duration 5s]
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

"$coordinator" --port 0 --bind 127.0.0.1 --data-dir "$work/ddp" \
  --port-file "$work/ddp.port" --log-level warning 2>"$work/coordinator.log" &
ddp_pid=$!
pids+=($ddp_pid)
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

for _ in $(seq 200); do [ -s "$work/ddp.port" ] && break; sleep 0.05; done
[ -s "$work/ddp.port" ] || { echo "bench_kv: coordinator did not start" >&2; cat "$work/coordinator.log" >&2; exit 1; }
for _ in $(seq 200); do
  ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$client_port" endpoint health >/dev/null 2>&1 && break
  sleep 0.1
done
echo "coordinator at 127.0.0.1:$(cat "$work/ddp.port"); $("$etcd" --version | head -1) at 127.0.0.1:$client_port"

# The PIDs let kv_bench report the server's CPU per operation next to its own.
"$kv_bench" --ddp "127.0.0.1:$(cat "$work/ddp.port")" --ddp_pid "$ddp_pid" \
  --etcd "127.0.0.1:$client_port" --etcd_pid "$etcd_pid" "$@"
