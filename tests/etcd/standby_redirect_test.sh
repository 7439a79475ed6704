#!/usr/bin/env bash
# Two coordinators on one etcd prefix: what a standby answers and how clients
# find the leader (issue 12).
#   - ddpctl cluster status: each coordinator's role, the leader, etcd health;
#   - ddpctl with a list whose first entry is the standby reaches the leader;
#     ddpctl with the standby alone gets UNAVAILABLE naming the leader;
#   - HTTP on the standby: /healthz 200, /readyz 503, /metrics leader 0,
#     /v1/cluster STANDBY, every API route 307 to the same route on the
#     leader (curl -L follows it, PUT keeps its method and body);
#   - kill -9 of the leader: the standby leads, the data is there.
# Skips, saying why, where etcd is missing.
set -euo pipefail

COORDINATOR="$TEST_SRCDIR/$TEST_WORKSPACE/coordinator/coordinator"
DDPCTL="$TEST_SRCDIR/$TEST_WORKSPACE/tools/ddpctl/ddpctl"
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/etcd/etcd_test_lib.sh"
command -v curl >/dev/null || fail "curl is not installed (tools/setup.sh installs it)"
start_etcd
client=$ETCD_CLIENT_PORT
STORE="etcd://127.0.0.1:$client/standby"

declare -A GRPC HTTP PID
start() {  # start NAME: a coordinator on $STORE with fixed gRPC and HTTP ports
  GRPC[$1]=$(free_port)
  HTTP[$1]=$(free_port)
  "$COORDINATOR" --port "${GRPC[$1]}" --http-port "${HTTP[$1]}" --bind 127.0.0.1 \
    --advertise-host 127.0.0.1 --store "$STORE" --data-dir "$WORK/$1" 2>"$WORK/$1.log" &
  PID[$1]=$!
  PIDS+=(${PID[$1]})
}
wait_for() {  # wait_for FILE TEXT SECONDS
  for _ in $(seq 1 $(($3 * 20))); do grep -q "$2" "$1" && return 0; sleep 0.05; done
  fail "no '$2' in $1 within $3 s"
}

start a
wait_for "$WORK/a.log" "leading: serving" 10
start b
for _ in $(seq 1 100); do  # b's ports are bound once it stands by
  curl -s -o /dev/null "http://127.0.0.1:${HTTP[b]}/healthz" && break
  sleep 0.05
done
A="127.0.0.1:${GRPC[a]}" B="127.0.0.1:${GRPC[b]}"

# ddpctl cluster status: roles, the leader, etcd's health.
status=$("$DDPCTL" --coordinator "$A,$B" cluster status) || fail "cluster status: $status"
echo "$status"
echo "$status" | grep -E "^$A +LEADER +true +$A +[0-9]+ " >/dev/null || fail "a is not shown as the leader"
echo "$status" | grep -E "^$B +standby +false +$A +- " >/dev/null || fail "b is not shown as a standby of a"
echo "$status" | grep -E "^127.0.0.1:$client +healthy +3\.4" >/dev/null ||
  fail "the etcd member is not shown healthy"

# ddpctl: a list that starts with the standby reaches the leader.
"$DDPCTL" --coordinator "$B,$A" kv put --namespace ha alpha 1 >/dev/null || fail "put through the list"
[ "$("$DDPCTL" --coordinator "$B,$A" kv get --namespace ha alpha)" = "1" ] || fail "get through the list"
# The standby alone: UNAVAILABLE (exit 3), the message names the leader.
set +e
"$DDPCTL" --coordinator "$B" kv get --namespace ha alpha >"$WORK/alone.out" 2>&1
alone=$?
set -e
[ "$alone" -eq 3 ] || fail "ddpctl to the standby alone exited $alone, not 3 (UNAVAILABLE)"
grep -q "standby; the leader is $A" "$WORK/alone.out" || fail "the refusal does not name the leader"

# HTTP on the standby.
SB="http://127.0.0.1:${HTTP[b]}" LD="http://127.0.0.1:${HTTP[a]}"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$SB/healthz")" = 200 ] || fail "standby /healthz is not 200"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$SB/readyz")" = 503 ] || fail "standby /readyz is not 503"
grep -q "^ddp_coordinator_leader 0$" <<<"$(curl -s "$SB/metrics")" || fail "standby metrics: leader not 0"
grep -q "^ddp_coordinator_leader 1$" <<<"$(curl -s "$LD/metrics")" || fail "leader metrics: leader not 1"
# Each has seen one leader elected: a.
grep -q "^ddp_coordinator_leader_changes_seen_total 1$" <<<"$(curl -s "$SB/metrics")" ||
  fail "standby metrics: leader changes not 1: $(curl -s "$SB/metrics")"
grep -q "^ddp_coordinator_leader_changes_seen_total 1$" <<<"$(curl -s "$LD/metrics")" ||
  fail "leader metrics: leader changes not 1"
grep -q '"role": *"STANDBY"' <<<"$(curl -s "$SB/v1/cluster")" || fail "standby /v1/cluster: not STANDBY"
headers=$(curl -s -o /dev/null -D - "$SB/v1/kv/ha/alpha?x=1")
echo "$headers" | grep -q "^HTTP/1.1 307" || fail "a standby's GET is not a 307: $headers"
echo "$headers" | grep -qi "^location: $LD/v1/kv/ha/alpha?x=1" || fail "307 not to the leader: $headers"
# Followed, a PUT keeps its method and body; the GET reads it back.
grep -q revision <<<"$(curl -s -L -X PUT "$SB/v1/kv/ha/beta" -d '{"value":"Mg=="}')" ||
  fail "PUT through the standby's redirect"
grep -q '"value": *"Mg=="' <<<"$(curl -s -L "$SB/v1/kv/ha/beta")" || fail "GET through the redirect"

# kill -9 of the leader: b leads (a's lease is 2 s), everything is there.
kill -KILL "${PID[a]}"
wait_for "$WORK/b.log" "leading: serving" 10
[ "$("$DDPCTL" --coordinator "$A,$B" kv get --namespace ha alpha)" = "1" ] || fail "alpha after failover"
[ "$("$DDPCTL" --coordinator "$A,$B" kv get --namespace ha beta)" = "2" ] || fail "beta after failover"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$SB/readyz")" = 200 ] || fail "new leader /readyz not 200"
# b has seen a, then itself.
grep -q "^ddp_coordinator_leader_changes_seen_total 2$" <<<"$(curl -s "$SB/metrics")" ||
  fail "new leader metrics: leader changes not 2"
grep -q '"leaderChanges": *2' <<<"$("$DDPCTL" --coordinator "$B" --json cluster status)" ||
  fail "cluster status --json: leaderChanges not 2: $("$DDPCTL" --coordinator "$B" --json cluster status)"
kill -TERM "${PID[b]}"
wait "${PID[b]}" || fail "the leader exited non-zero on SIGTERM"
echo "PASSED"
