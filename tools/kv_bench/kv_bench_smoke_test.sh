#!/usr/bin/env bash
# Runs kv_bench briefly against a real coordinator and checks every phase ran.
set -euo pipefail
root="$TEST_SRCDIR/ddp_coordinator"
dir="$TEST_TMPDIR"
"$root/coordinator/coordinator" --port 0 --bind 127.0.0.1 --data-dir "$dir/data" \
  --port-file "$dir/port" 2>"$dir/coordinator.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 200); do [ -s "$dir/port" ] && break; sleep 0.05; done
rc=0
out=$("$root/tools/kv_bench/kv_bench" --ddp "127.0.0.1:$(cat "$dir/port")" \
  --duration 200ms --put_clients 1,4 --clients 4 --watchers 20,30 --watch_rounds 3 \
  --ddp_pid "$pid" 2>&1) || rc=$?
echo "$out"
if [ "$rc" != 0 ]; then
  echo "kv_bench exited with $rc; coordinator log:"; tail -50 "$dir/coordinator.log"; exit 1
fi
for phase in "put (durable), 1 clients" "put (durable), 4 clients" "get, 4 clients" \
  "add (one counter), 4 clients" "watch fan-out, 20" "watch fan-out, 30"; do
  grep -qF "$phase" <<<"$out" || { echo "missing phase: $phase"; exit 1; }
done
if grep -q "errors, first" <<<"$out"; then echo "errors reported"; exit 1; fi
grep -qF "3 rounds" <<<"$out" || { echo "fan-out rounds missing"; exit 1; }
grep -qF "server RSS +" <<<"$out" || { echo "RSS per watcher missing"; exit 1; }
