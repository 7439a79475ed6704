# Sourced by the tests of this folder: a one-member etcd on loopback for a
# test, and the helpers around it. Skips the test (exit 0, saying why) where
# etcd is missing. Sets WORK (a fresh directory), PIDS (killed at exit) and,
# after start_etcd, ETCD_CLIENT_PORT.
ETCD=/usr/bin/etcd
if [ ! -x "$ETCD" ]; then
  echo "SKIPPED: $ETCD is not installed (tools/setup.sh installs etcd-server)"
  exit 0
fi
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/etcd.XXXXXX")"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
fail() { echo "FAILED: $*" >&2; tail -n 20 "$WORK"/*.log >&2 || true; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start_etcd() {  # one member; returns once its client port answers
  ETCD_CLIENT_PORT=$(free_port)
  local peer
  peer=$(free_port)
  "$ETCD" --data-dir "$WORK/etcd" --name t --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "t=http://127.0.0.1:$peer" --max-txn-ops 100000 --log-level warn \
    2>"$WORK/etcd.log" &
  PIDS+=($!)
  for _ in $(seq 1 100); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $ETCD_CLIENT_PORT), 0.2)" \
      2>/dev/null && return 0
    sleep 0.1
  done
  fail "etcd did not start"
}
