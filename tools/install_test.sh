#!/bin/bash
# //:install_test: `install PREFIX` puts the binaries, the Python package and the
# docs where a node expects them; then a ddp-client copied alone to an empty
# folder, with nothing else on PATH, runs a job in --standalone, in torchrun's
# c10d form and in torch.distributed.launch's static form (it serves the
# coordinator from its own executable); and the installed ddp-client gives its
# Python workers the installed ddp_coordinator package.
set -uo pipefail

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

install_bin="$TEST_SRCDIR/ddp_coordinator/install"
prefix="$TEST_TMPDIR/prefix"
"$install_bin" "$prefix" || fail "install exited $?"
for f in bin/coordinator bin/ddp-client bin/ddpctl \
  lib/python3/dist-packages/ddp_coordinator/__init__.py \
  lib/python3/dist-packages/ddp_coordinator/_proto/kv_pb2.py \
  share/doc/ddp-coordinator/README.md share/doc/ddp-coordinator/operations.md \
  share/ddp-coordinator/examples/train_ddp.py; do
  [[ -e "$prefix/$f" ]] || fail "install put no $f under the prefix"
done
[[ -x "$prefix/bin/ddp-client" ]] || fail "bin/ddp-client is not executable"

# Bad arguments: exit 2, the usage on stderr.
"$install_bin" >/dev/null 2>"$TEST_TMPDIR/usage.err"
rc=$?
[[ $rc -eq 2 ]] || fail "install with no PREFIX exited $rc, not 2"
grep -q "usage: bazel run //:install -- PREFIX" "$TEST_TMPDIR/usage.err" ||
  fail "install with no PREFIX printed no usage: $(cat "$TEST_TMPDIR/usage.err")"

# A node with ddp-client alone: no coordinator beside it or on PATH, no runfiles.
node="$TEST_TMPDIR/node"
mkdir -p "$node"
cp "$prefix/bin/ddp-client" "$node/ddp-client"
cat >"$node/worker.sh" <<'WORKER'
#!/bin/sh
echo "worker rank $RANK of $WORLD_SIZE"
WORKER
chmod +x "$node/worker.sh"
free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
run_alone() {  # NAME ARGS...: runs $node/ddp-client with a bare environment
  local name=$1
  shift
  (cd "$node" && env -i PATH=/usr/bin:/bin HOME="$TEST_TMPDIR" TMPDIR="$TEST_TMPDIR" \
    timeout 120 ./ddp-client --log-dir "$node/logs_$name" "$@" >"$node/$name.out" 2>&1)
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    fail "$name: ddp-client alone exited $rc: $(tail -5 "$node/$name.out")"
  elif [[ $(grep -c "worker rank" "$node/$name.out") -ne 2 ]]; then
    fail "$name: expected two workers' lines: $(cat "$node/$name.out")"
  fi
}
run_alone standalone --standalone --nproc-per-node 2 --no-python ./worker.sh
port=$(free_port)
run_alone c10d --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" --rdzv-id lone \
  --nnodes 1 --nproc-per-node 2 --no-python ./worker.sh
port=$(free_port)
run_alone static --nnodes 1 --node-rank 0 --master-addr 127.0.0.1 --master-port "$port" \
  --nproc-per-node 2 --no-python ./worker.sh
grep -q "serve-coordinator" "$node"/logs_standalone/*/agent.log ||
  fail "the standalone agent's log does not say it served the coordinator from its own binary"

# The installed ddp-client hands its Python workers the installed package.
cat >"$node/which_package.py" <<'WORKER'
import os, ddp_coordinator
print("package at", os.path.realpath(ddp_coordinator.__file__))
WORKER
(cd "$node" && env -i PATH=/usr/bin:/bin HOME="$TEST_TMPDIR" TMPDIR="$TEST_TMPDIR" \
  PYTHON_EXEC=/usr/bin/python3 timeout 120 "$prefix/bin/ddp-client" --standalone \
  --log-dir "$node/logs_python" which_package.py >"$node/python.out" 2>&1) ||
  fail "the installed ddp-client with a Python worker failed: $(tail -5 "$node/python.out")"
want="package at $(realpath "$prefix")/lib/python3/dist-packages/ddp_coordinator/__init__.py"
grep -qF "$want" "$node/python.out" ||
  fail "the worker did not import the installed package ($want): $(cat "$node/python.out")"

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "install_test: all checks passed"
