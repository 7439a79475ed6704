#!/usr/bin/env bash
# What TLS and token checks cost on KV put and get, at 1 and 256 clients, as a
# ratio to plaintext in the same run (docs/benchmarks.md, "Security"). For
# each round and mode (plaintext; TLS; mTLS + admin token) a fresh coordinator
# serves kv_bench; the modes alternate so machine noise falls on all of them.
#
# Usage: tools/bench_security.sh [ROUNDS (default 2)] [SECONDS per phase (default 3)]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-2}"
seconds="${2:-3}"
bazel build //coordinator:coordinator //tools/kv_bench:kv_bench >/dev/null 2>&1 ||
  { echo "bench_security: bazel build failed" >&2; exit 1; }
coordinator="$PWD/bazel-bin/coordinator/coordinator"
kv_bench="$PWD/bazel-bin/tools/kv_bench/kv_bench"
work=$(mktemp -d -t ddp-bench-security.XXXXXX)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# Certificates (EC P-256; SAN 127.0.0.1) and an admin token.
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
(cd "$work" &&
  printf 'subjectAltName=IP:127.0.0.1\n' > server.ext &&
  openssl req -x509 $ec -keyout ca.key -out ca.crt -days 1 -subj /CN=bench-ca &&
  openssl req $ec -keyout server.key -out server.csr -subj /CN=server &&
  openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
    -days 1 -extfile server.ext &&
  openssl req $ec -keyout client.key -out client.csr -subj /CN=client &&
  openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 1 &&
  head -c 32 /dev/urandom | base64 > admin.token) >/dev/null 2>&1

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')"
for round in $(seq 1 "$rounds"); do
  for mode in plaintext tls mtls+token; do
    server=(); client=()
    case "$mode" in
      tls) server=(--tls-cert "$work/server.crt" --tls-key "$work/server.key")
           client=(--ddp_tls_ca "$work/ca.crt") ;;
      mtls+token)
           server=(--tls-cert "$work/server.crt" --tls-key "$work/server.key"
                   --tls-client-ca "$work/ca.crt" --admin-token-file "$work/admin.token")
           client=(--ddp_tls_ca "$work/ca.crt" --ddp_tls_cert "$work/client.crt"
                   --ddp_tls_key "$work/client.key" --ddp_token_file "$work/admin.token") ;;
    esac
    rm -rf "$work/data" "$work/port"
    "$coordinator" --port 0 --bind 127.0.0.1 --http-port 0 --data-dir "$work/data" \
      --port-file "$work/port" --log-level warning "${server[@]}" 2>"$work/coordinator.log" &
    pid=$!
    for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
    address="127.0.0.1:$(cat "$work/port")"
    for clients in 1 256; do
      echo "== round $round, $mode, $clients client(s)"
      "$kv_bench" --ddp "$address" --ddp_pid "$pid" --phases put,get --put_clients "$clients" \
        --clients "$clients" --duration "${seconds}s" --watchers 0 "${client[@]}" 2>&1 |
        grep -E "put|get" | grep -v "^#" || true
    done
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  done
done
