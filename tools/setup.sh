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

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "setup: missing packages (${missing[*]}) and not root; rerun as root" >&2
    exit 1
  fi
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
