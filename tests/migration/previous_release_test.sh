#!/usr/bin/env bash
# A data dir written by the previous release (the KV store in coordinator.db,
# the jobs in jobs.db; see make_previous_release_data_dir.sh) opens in this
# one: the jobs are imported into coordinator.db in one transaction, jobs.db
# is kept as jobs.db.imported, and every job, past run, failure, node and key
# reads exactly as that release showed it (expected/), except where the API
# changed on purpose since: a finished job lists its nodes as members (group
# rank -1), not spares (2026-11-26, docs/api.md), and the job settings show
# hang_timeout_ms, 10 s for jobs stored before it existed (2026-11-27), and a finished
# job's memberCount and worldSize are its last generation's, as before the restart (that
# release showed 0 once it had restarted; 2026-11-27). Then: a restart does
# not import again, writes go on at the next revision, and the same dir with
# a truncated or missing jobs.db is refused (exit 3) instead of served empty.
set -euo pipefail

COORDINATOR="$TEST_SRCDIR/$TEST_WORKSPACE/coordinator/coordinator"
DDPCTL="$TEST_SRCDIR/$TEST_WORKSPACE/tools/ddpctl/ddpctl"
HERE="$TEST_SRCDIR/$TEST_WORKSPACE/tests/migration"
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/migration.XXXXXX")"
PID=""
cleanup() {
  [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
}
trap cleanup EXIT
fail() { echo "FAILED: $*" >&2; tail -n 30 "$WORK"/*.log >&2 || true; exit 1; }

fresh_copy() {  # the fixture, writable, at $WORK/$1
  rm -rf "${WORK:?}/$1"
  cp -rL "$HERE/previous_release_data_dir" "$WORK/$1"  # -L: copies, never the runfiles links
  chmod -R u+w "$WORK/$1"
}
start() {  # start DIR LOG: a coordinator on DIR; sets PID and ADDR
  rm -f "$WORK/port"
  "$COORDINATOR" --port 0 --bind 127.0.0.1 --http-port -1 --data-dir "$1" \
    --port-file "$WORK/port" 2>"$2" &
  PID=$!
  for _ in $(seq 1 200); do [ -s "$WORK/port" ] && break; sleep 0.05; done
  [ -s "$WORK/port" ] || fail "the coordinator did not start on $1"
  ADDR="127.0.0.1:$(cat "$WORK/port")"
}
stop() { kill -TERM "$PID"; wait "$PID" || fail "the coordinator exited non-zero"; PID=""; }
ctl() { "$DDPCTL" --coordinator "$ADDR" --json "$@" | sed -E 's/"heartbeatAgeMs":[0-9]+,//g'; }
same() {  # same NAME: what this release answers equals what the previous one did
  diff <(cat "$WORK/$1.json") "$HERE/expected/$1.json" >/dev/null ||
    fail "$1 differs from the previous release's: $(diff "$WORK/$1.json" "$HERE/expected/$1.json")"
}
read_all() {
  ctl jobs list --all-runs >"$WORK/list.json"
  ctl jobs get failed-twice >"$WORK/get.json"
  ctl jobs get failed-twice --run 1 >"$WORK/get_run1.json"
  { ctl kv list ""; ctl --namespace other kv list ""; } >"$WORK/kv.json"
}

# 1. The import.
fresh_copy data
start "$WORK/data" "$WORK/first.log"
grep -q "imported 3 jobs from $WORK/data/jobs.db" "$WORK/first.log" ||
  fail "no import line in the log"
read_all
for name in list get get_run1 kv; do same "$name"; done
[ -e "$WORK/data/jobs.db" ] && fail "jobs.db is still there after the import"
[ -s "$WORK/data/jobs.db.imported" ] || fail "jobs.db.imported is missing"
# Writes go on from the imported revision (6).
grep -q "revision 7" <<<"$("$DDPCTL" --coordinator "$ADDR" kv put after-import yes)" ||
  fail "the first write after the import is not revision 7"
stop

# 2. A restart reads the one database; nothing is imported again.
start "$WORK/data" "$WORK/second.log"
grep -q "imported" "$WORK/second.log" && fail "the second start imported again"
read_all
for name in list get get_run1; do same "$name"; done
grep -q yes <<<"$("$DDPCTL" --coordinator "$ADDR" kv get after-import)" || fail "after-import is lost"
stop

# 3. A previous-release dir whose jobs.db was truncated, or deleted, is refused.
refused() {  # refused NAME HOW: the coordinator exits 3 on that dir, naming jobs.db
  set +e
  "$COORDINATOR" --port 0 --bind 127.0.0.1 --http-port -1 --data-dir "$WORK/$1" 2>"$WORK/$1.log"
  local status=$?
  set -e
  [ "$status" -eq 3 ] || fail "a dir with $2 exited $status, not 3"
  grep -q "jobs.db" "$WORK/$1.log" || fail "the refusal of a dir with $2 does not name jobs.db"
}
fresh_copy truncated
: >"$WORK/truncated/jobs.db"
refused truncated "an empty jobs.db"
grep -q "jobs.db is empty" "$WORK/truncated.log" || fail "the refusal does not say jobs.db is empty"
fresh_copy missing
rm "$WORK/missing/jobs.db"
refused missing "no jobs.db"
echo "PASSED"
