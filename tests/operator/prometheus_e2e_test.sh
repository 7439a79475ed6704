#!/usr/bin/env bash
# A real Prometheus server (Debian's prometheus 2.42) scrapes a real coordinator
# that runs a job (a ddp-client with two workers); the coordinator's live scrape
# passes `promtool check metrics`, and Prometheus' query API returns the job's
# series. Skips, saying why, where prometheus or promtool is missing.
set -euo pipefail

COORDINATOR="$TEST_SRCDIR/$TEST_WORKSPACE/coordinator/coordinator"
CLIENT="$TEST_SRCDIR/$TEST_WORKSPACE/client/agent/ddp-client"
for tool in prometheus promtool curl; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIPPED: $tool is not installed (tools/setup.sh installs it)"
    exit 0
  fi
done

WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/prom.XXXXXX")"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${TEST_UNDECLARED_OUTPUTS_DIR:-}" ]; then
    cp "$WORK"/*.log "$WORK"/scrape.txt "$TEST_UNDECLARED_OUTPUTS_DIR"/ 2>/dev/null || true
  fi
}
trap cleanup EXIT
fail() { echo "FAILED: $*" >&2; tail -n 30 "$WORK"/*.log >&2 || true; exit 1; }
wait_file() { for _ in $(seq 1 200); do [ -s "$1" ] && return 0; sleep 0.1; done; return 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

"$COORDINATOR" --port 0 --bind 127.0.0.1 --port-file "$WORK/port" --heartbeat-udp \
  --http-port-file "$WORK/http_port" --data-dir "$WORK/data" 2>"$WORK/coordinator.log" &
PIDS+=($!)
wait_file "$WORK/http_port" || fail "the coordinator wrote no --http-port-file"
GRPC="127.0.0.1:$(cat "$WORK/port")"
HTTP="127.0.0.1:$(cat "$WORK/http_port")"

"$CLIENT" --coordinator "$GRPC" --rdzv-id metrics-e2e --nnodes 1 --nproc-per-node 2 \
  --node-id node-a --local-addr 127.0.0.1 --no-python /bin/sh -c 'sleep 120' \
  >"$WORK/agent.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 150); do
  grep -q '"state":"RUNNING"' <<<"$(curl -sf "http://$HTTP/v1/jobs/metrics-e2e")" && break
  sleep 0.2
done
grep -q '"state":"RUNNING"' <<<"$(curl -sf "http://$HTTP/v1/jobs/metrics-e2e")" ||
  fail "the job did not reach RUNNING"

# The agent's heartbeats go over UDP (--heartbeat-udp): counted once one arrived.
for _ in $(seq 1 50); do
  grep -q '^ddp_heartbeat_datagrams_total{result="accepted"} [1-9]' <<<"$(curl -sf "http://$HTTP/metrics")" &&
    break
  sleep 0.2
done
curl -sf "http://$HTTP/metrics" >"$WORK/scrape.txt" || fail "GET /metrics failed"
promtool check metrics <"$WORK/scrape.txt" || fail "promtool check metrics rejected the scrape"
grep -q '^ddp_job_generation{job_id="metrics-e2e"} 1' "$WORK/scrape.txt" ||
  fail "the scrape lacks the job's generation"
grep -q '^ddp_agents_connected 1' "$WORK/scrape.txt" || fail "the scrape lacks the agent"
grep -q '^ddp_sessions_open 1' "$WORK/scrape.txt" || fail "the scrape lacks the agent's session"
grep -q '^ddp_heartbeat_datagrams_total{result="accepted"} [1-9]' "$WORK/scrape.txt" ||
  fail "no heartbeat datagram accepted"
grep -q '^ddp_heartbeat_datagram_acks_total ' "$WORK/scrape.txt" || fail "the scrape lacks the acks"
echo "promtool check metrics: OK ($(grep -vc '^#' "$WORK/scrape.txt") samples)"

PROM_PORT="$(free_port)"
cat >"$WORK/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: ddp-coordinator
    static_configs:
      - targets: ["$HTTP"]
YAML
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$PROM_PORT" >"$WORK/prometheus.log" 2>&1 &
PIDS+=($!)

query() {
  curl -sf --get "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1"
}
found=""
for _ in $(seq 1 120); do
  if result="$(query 'ddp_job_generation{job_id="metrics-e2e"}')" &&
    echo "$result" | grep -q '"job_id":"metrics-e2e"'; then
    found="$result"
    break
  fi
  sleep 0.5
done
[ -n "$found" ] || fail "Prometheus' query API never returned the job's series"
echo "query ddp_job_generation: $found"
echo "$found" | grep -q '"job":"ddp-coordinator"' || fail "the series lacks the scrape job label"
ratio="$(query 'ddp_job_effective_training_ratio{job_id="metrics-e2e"}')"
echo "$ratio" | grep -q '"job_id":"metrics-e2e"' || fail "no effective-training-ratio series: $ratio"
up="$(query 'up{job="ddp-coordinator"}')"
echo "$up" | grep -q '"1"\]' || fail "the target is not up: $up"
echo "PASSED: Prometheus scraped the coordinator and returned the job's series"
