#!/usr/bin/env bash
# Installs, idempotently and non-interactively, every Debian package that the build, the
# tests, the benchmarks and the demo need. Safe to run again: it installs only what is
# missing and runs `apt-get update` only when something is. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  # Build: Bazel 4.2.3 offline, compilers, protoc + gRPC plugin.
  bazel-bootstrap g++ protobuf-compiler protobuf-compiler-grpc
  # Fuzzing (tools/fuzz.sh): clang-14 with libFuzzer and the sanitizers.
  clang-14 libclang-rt-14-dev
  # Libraries (third_party/BUILD.bazel links them).
  libgrpc++-dev libprotobuf-dev libabsl-dev libsqlite3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # The HTTP listener (REST, /metrics, dashboard) and its metrics.
  libcpp-httplib-dev prometheus-cpp-dev
  # End-to-end tests and the demo: PyTorch (CPU, gloo) for /usr/bin/python3.
  python3 python3-torch
  # The Python package (python/ddp_coordinator): gRPC and protobuf, pip to install it
  # offline, pytest for its tests.
  python3-grpcio python3-protobuf python3-pip python3-setuptools python3-pytest
  # Benchmarks: etcd 3.4 is measured side by side with the coordinator.
  etcd-server etcd-client
  # Operator-surface tests: promtool and a real Prometheus server; a real browser.
  prometheus chromium
  # Tools the scripts use.
  procps iproute2 ca-certificates curl
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
fi

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
else
  if [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then
    echo "setup: missing packages (${missing[*]}) and not root; rerun as root" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: done"
fi

# The Python package for /usr/bin/python3, from this checkout, without any network; again
# only when its sources or the protos changed (the version carries their hash).
python_dir="$(cd "$(dirname "$0")/../python" && pwd)"
want=$(/usr/bin/python3 "$python_dir/source_version.py")
have=$(/usr/bin/python3 -c 'import importlib.metadata as m; print(m.version("ddp-coordinator"))' \
  2>/dev/null || true)
if [ "$want" != "$have" ]; then
  echo "setup: installing the Python package ddp_coordinator $want for /usr/bin/python3"
  $SUDO /usr/bin/python3 -m pip install --quiet --no-deps --no-build-isolation --no-index \
    --break-system-packages --root-user-action=ignore "$python_dir" >/dev/null
fi
