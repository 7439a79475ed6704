#!/usr/bin/env bash
# The coordinator with its state in a real etcd (--store etcd://...): what one
# coordinator acknowledged is there for the next one after kill -9, even on
# another host's data dir (revisions continue, jobs are restored); a SQLite
# data dir copied with --copy-state-to is served from etcd; a bad
# --store value and an unreachable etcd are refused with a clear message.
# Skips, saying why, where etcd is missing.
set -euo pipefail

COORDINATOR="$TEST_SRCDIR/$TEST_WORKSPACE/coordinator/coordinator"
DDPCTL="$TEST_SRCDIR/$TEST_WORKSPACE/tools/ddpctl/ddpctl"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/etcd/etcd_test_lib.sh"
start_etcd
client=$ETCD_CLIENT_PORT
STORE="etcd://127.0.0.1:$client/e2e"

start() {  # start DATA_DIR LOG: a coordinator on etcd; sets PID and ADDR
  rm -f "$WORK/port"
  "$COORDINATOR" --port 0 --bind 127.0.0.1 --http-port -1 --store "$STORE" --data-dir "$1" \
    --port-file "$WORK/port" 2>"$2" &
  PID=$!
  PIDS+=($PID)
  for _ in $(seq 1 200); do [ -s "$WORK/port" ] && break; sleep 0.05; done
  [ -s "$WORK/port" ] || fail "the coordinator did not start on $STORE"
  ADDR="127.0.0.1:$(cat "$WORK/port")"
  # Elected once the lease of the one before (killed) ran out: 2 s at most.
  for _ in $(seq 1 200); do grep -q "leading: serving $STORE" "$2" && break; sleep 0.05; done
  grep -q "leading: serving $STORE" "$2" || fail "the coordinator was not elected on $STORE"
}
ctl() { "$DDPCTL" --coordinator "$ADDR" "$@"; }


start "$WORK/a" "$WORK/a.log"
grep -q "revision 1" <<<"$(ctl kv put alpha 1)" || fail "the first put is not revision 1"
ctl jobs create trainer --nnodes 1:2 >/dev/null || fail "jobs create"
kill -KILL "$PID"
wait "$PID" 2>/dev/null || true

# Another coordinator (another data dir: another host) on the same etcd prefix.
start "$WORK/b" "$WORK/b.log"
[ "$(ctl kv get alpha)" = "1" ] || fail "alpha is lost after kill -9"
grep -q "revision 2" <<<"$(ctl kv put beta 2)" || fail "revisions do not continue from etcd"
grep -q "WAITING" <<<"$(ctl jobs get trainer)" || fail "the job is lost after kill -9"
kill -TERM "$PID"
wait "$PID" || fail "the coordinator exited non-zero on SIGTERM"

# Moving a site from SQLite to etcd: a SQLite coordinator's keys and jobs,
# copied with --copy-state-to, are served by a coordinator on etcd.
rm -f "$WORK/port"
"$COORDINATOR" --port 0 --bind 127.0.0.1 --http-port -1 --data-dir "$WORK/sqlite" \
  --port-file "$WORK/port" 2>"$WORK/sqlite.log" &
PID=$!
PIDS+=($PID)
for _ in $(seq 1 200); do [ -s "$WORK/port" ] && break; sleep 0.05; done
ADDR="127.0.0.1:$(cat "$WORK/port")"
ctl kv put --namespace keep gamma 3 >/dev/null || fail "put on SQLite"
ctl kv put --namespace keep delta 4 >/dev/null || fail "put on SQLite"
ctl jobs create mover --nnodes 2:4 >/dev/null || fail "jobs create on SQLite"
set +e
"$COORDINATOR" --data-dir "$WORK/sqlite" --copy-state-to "etcd://127.0.0.1:$client/moved" \
  2>"$WORK/copy-running.log"
running=$?
set -e
[ "$running" -ne 0 ] || fail "a copy of a data dir in use was not refused"
grep -q "is in use by another coordinator" "$WORK/copy-running.log" || fail "the refusal of a locked data dir does not say why"
kill -TERM "$PID"
wait "$PID" || fail "the SQLite coordinator exited non-zero on SIGTERM"
"$COORDINATOR" --data-dir "$WORK/sqlite" --copy-state-to "etcd://127.0.0.1:$client/moved" \
  2>"$WORK/copy.log" || fail "--copy-state-to failed"
grep -q "copied revision 2: 2 keys, 0 leases, 1 jobs" "$WORK/copy.log" || fail "no copy summary"
set +e
"$COORDINATOR" --data-dir "$WORK/sqlite" --copy-state-to "etcd://127.0.0.1:$client/moved" \
  2>"$WORK/copy-again.log"
again=$?
set -e
[ "$again" -eq 1 ] || fail "a second copy into the same prefix exited $again, not 1"
grep -q "not empty" "$WORK/copy-again.log" || fail "the second copy does not say the prefix is not empty"
STORE="etcd://127.0.0.1:$client/moved"
start "$WORK/moved" "$WORK/moved.log"
[ "$(ctl kv get --namespace keep delta)" = "4" ] || fail "delta not moved to etcd"
grep -q "revision 3" <<<"$(ctl kv put --namespace keep epsilon 5)" || fail "revisions do not continue after the move"
grep -q "WAITING" <<<"$(ctl jobs get mover)" || fail "the job was not moved to etcd"
kill -TERM "$PID"
wait "$PID" || fail "the coordinator on the moved prefix exited non-zero on SIGTERM"

# Refusals.
set +e
"$COORDINATOR" --port 0 --http-port -1 --data-dir "$WORK/c" --store "etcd://nohost" 2>"$WORK/bad.log"
status=$?
"$COORDINATOR" --port 0 --http-port -1 --data-dir "$WORK/d" \
  --store "etcd://127.0.0.1:$(free_port)/x" 2>"$WORK/down.log"
down=$?
set -e
[ "$status" -eq 2 ] || fail "a bad --store exited $status, not 2"
grep -q "etcd://HOST:PORT" "$WORK/bad.log" || fail "the bad --store message shows no form"
[ "$down" -ne 0 ] || fail "an unreachable etcd was accepted"
grep -q "cannot reach etcd at" "$WORK/down.log" || fail "an unreachable etcd is not named"
echo "PASSED"
