#!/bin/bash
# A real coordinator's /metrics after one gRPC call (ddpctl kv put): the
# Prometheus process metrics, ddp_build_info, the database size and the gRPC
# server metrics in the names and labels Grafana's gRPC dashboards query; the
# scrape passes `promtool check metrics` (skipped, saying so, without promtool).
set -euo pipefail
R="${TEST_SRCDIR}/ddp_coordinator"
WORK="${TEST_TMPDIR}/metrics"
mkdir -p "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$R/coordinator/coordinator" --port 0 --port-file "$WORK/port" --http-port-file "$WORK/http" \
  --data-dir "$WORK/data" 2>"$WORK/log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 300); do [[ -s "$WORK/http" && -s "$WORK/port" ]] && break; sleep 0.1; done
[[ -s "$WORK/http" ]] || { cat "$WORK/log" >&2; fail "the coordinator did not start"; }
"$R/tools/ddpctl/ddpctl" --coordinator "127.0.0.1:$(cat "$WORK/port")" kv put --namespace m k v \
  >/dev/null || fail "ddpctl kv put failed"
curl -sf "http://127.0.0.1:$(cat "$WORK/http")/metrics" >"$WORK/scrape.txt" || fail "no /metrics"

expect() {
  grep -Eq "$1" "$WORK/scrape.txt" || fail "no line matching '$1' in the scrape:
$(grep -v '^#' "$WORK/scrape.txt" | head -n 60)"
}
expect '^process_cpu_seconds_total [0-9.e+-]+$'
expect '^process_resident_memory_bytes [1-9][0-9.e+]*$'
expect '^process_open_fds [1-9][0-9]*$'
expect '^process_max_fds [1-9][0-9]*$'
expect '^process_start_time_seconds 1[0-9.e+]+$'
expect '^ddp_build_info\{mode="(release|development)",version="[0-9]+\.[0-9]+\.[0-9]+"\} 1$'
expect '^ddp_store_database_bytes [1-9][0-9.e+]*$'
# fsync apart from the commit: the write-ahead log's, at every commit
expect '^ddp_store_fsync_duration_seconds_count\{file="wal"\} [1-9][0-9]*$'
expect '^grpc_server_started_total\{grpc_method="Put",grpc_service="ddp\.v1\.KeyValueService",grpc_type="unary"\} 1$'
expect '^grpc_server_handled_total\{grpc_code="OK",grpc_method="Put",grpc_service="ddp\.v1\.KeyValueService",grpc_type="unary"\} 1$'
expect '^grpc_server_handling_seconds_bucket\{grpc_method="Put",grpc_service="ddp\.v1\.KeyValueService",grpc_type="unary",le="\+Inf"\} 1$'
expect '^ddp_rpc_requests_total\{code="OK",method="Put",service="KeyValueService"\} 1$'

if command -v promtool >/dev/null; then
  promtool check metrics <"$WORK/scrape.txt" || fail "promtool check metrics rejected the scrape"
  echo "promtool check metrics: OK"
else
  echo "promtool missing: skipped its check"
fi
echo PASS
