#!/usr/bin/env bash
# High-availability benchmarks (issue 12), on this machine:
#   1. failover time: //tools/failover_bench (3-member etcd, 3 coordinators,
#      16 agents; kill -9 of the leader, time until every agent resumed);
#   2. KV put throughput and p99 at 1, 16 and 256 clients: through the HA
#      coordinators (the leader, state in the 3-member etcd) and etcd alone
#      (the same cluster) in one kv_bench run, then the SQLite coordinator
#      with the same tool and flags;
#   3. rdzv_sim at 1,024 nodes against the HA leader: rendezvous and restart.
#
#   tools/bench_ha.sh [--kills N] [--duration 3s] [--nodes 1024]
# Needs /usr/bin/etcd (Debian's etcd-server). Exit 1 if anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
kills=20 duration=3s nodes=1024
while [ $# -gt 0 ]; do
  case "$1" in
    --kills) kills=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    *) echo "bench_ha: unknown argument $1" >&2; exit 2 ;;
  esac
done
etcd=/usr/bin/etcd
[ -x "$etcd" ] || { echo "bench_ha: $etcd missing (tools/setup.sh installs etcd-server)" >&2; exit 1; }
bazel build //coordinator:coordinator //tools/kv_bench //tools/rdzv_sim //tools/ddpctl \
  //tools/failover_bench >/dev/null 2>&1 || { echo "bench_ha: bazel build failed" >&2; exit 1; }
bin="$PWD/bazel-bin"
work=$(mktemp -d -t ddp-bench-ha.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'); $("$etcd" --version | head -1)"

echo; echo "== 1. failover: kill -9 of the leader -> every agent resumed"
TEST_SRCDIR="$bin/tools/failover_bench/failover_bench.runfiles" \
  "$bin/tools/failover_bench/failover_bench" --kills "$kills" --agents 16 --work_dir "$work" 2>/dev/null |
  grep -v "^20[0-9][0-9]-"

# A 3-member etcd cluster on loopback (LAN raft timers), three coordinators.
cluster="" endpoints=""
for i in 0 1 2; do
  client[$i]=$(free_port); peer[$i]=$(free_port)
  cluster+="m$i=http://127.0.0.1:${peer[$i]},"; endpoints+="127.0.0.1:${client[$i]},"
done
cluster=${cluster%,} endpoints=${endpoints%,}
for i in 0 1 2; do
  "$etcd" --name m$i --data-dir "$work/m$i" --listen-client-urls "http://127.0.0.1:${client[$i]}" \
    --advertise-client-urls "http://127.0.0.1:${client[$i]}" \
    --listen-peer-urls "http://127.0.0.1:${peer[$i]}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${peer[$i]}" --initial-cluster "$cluster" \
    --max-txn-ops 100000 --heartbeat-interval 50 --election-timeout 500 --log-level warn \
    2>"$work/m$i.log" &
  pids+=($!)
  etcd_pid[$i]=$!
done
for _ in $(seq 100); do
  ETCDCTL_API=3 etcdctl --endpoints "$endpoints" endpoint health >/dev/null 2>&1 && break
  sleep 0.1
done
targets=""
for i in 0 1 2; do
  "$bin/coordinator/coordinator" --port 0 --http-port 0 --bind 127.0.0.1 --data-dir "$work/c$i" \
    --store "etcd://$endpoints/bench" --port-file "$work/c$i.port" --log-level warning \
    2>"$work/c$i.log" &
  pids+=($!)
  cpid[$i]=$!
  for _ in $(seq 200); do [ -s "$work/c$i.port" ] && break; sleep 0.05; done
  targets+="127.0.0.1:$(cat "$work/c$i.port"),"
done
targets=${targets%,}
leader=""
for _ in $(seq 100); do
  leader=$("$bin/tools/ddpctl/ddpctl" --coordinator "$targets" --json cluster status 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    s = json.loads(line)
    if s["role"] == "LEADER": print(s["self"]["grpcAddress"])' | head -1) || true
  [ -n "$leader" ] && break
  sleep 0.1
done
[ -n "$leader" ] || { echo "bench_ha: no leader elected" >&2; exit 1; }
leader_pid=""
for i in 0 1 2; do [ "127.0.0.1:$(cat "$work/c$i.port")" = "$leader" ] && leader_pid=${cpid[$i]}; done
raft_leader=$(ETCDCTL_API=3 etcdctl --endpoints "$endpoints" endpoint status -w json |
  python3 -c 'import json,sys
for s in json.load(sys.stdin):
    if s["Status"]["leader"] == s["Status"]["header"]["member_id"]: print(s["Endpoint"])')

echo; echo "== 2a. KV put: HA coordinators (leader $leader, state in the 3-member etcd) vs etcd alone ($raft_leader, its raft leader)"
"$bin/tools/kv_bench/kv_bench" --phases put --put_clients 1,16,256 --duration "$duration" \
  --ddp "$leader" --ddp_pid "$leader_pid" --etcd "$raft_leader" 2>/dev/null

"$bin/coordinator/coordinator" --port 0 --http-port 0 --bind 127.0.0.1 --data-dir "$work/sqlite" \
  --port-file "$work/sqlite.port" --log-level warning 2>"$work/sqlite.log" &
pids+=($!)
sqlite_pid=$!
for _ in $(seq 200); do [ -s "$work/sqlite.port" ] && break; sleep 0.05; done
echo; echo "== 2b. KV put: the SQLite coordinator (same tool, same flags)"
"$bin/tools/kv_bench/kv_bench" --phases put --put_clients 1,16,256 --duration "$duration" \
  --ddp "127.0.0.1:$(cat "$work/sqlite.port")" --ddp_pid "$sqlite_pid" 2>/dev/null

echo; echo "== 3. rdzv_sim: $nodes nodes against the HA leader"
"$bin/tools/rdzv_sim/rdzv_sim" --nodes "$nodes" --coordinator "$leader" \
  --coordinator_pid "$leader_pid" --heartbeat_seconds 5 2>/dev/null
