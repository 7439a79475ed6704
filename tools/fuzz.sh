#!/usr/bin/env bash
# Runs every libFuzzer target (tests/fuzz) for SECONDS each, built with clang-14, ASan and
# UBSan in a separate Bazel output base. Each starts from a copy of its seed corpus in the
# repo and prints libFuzzer's final stats; a crash leaves its input under the work dir and
# makes this script exit 1 (add the input to tests/fuzz/corpus/NAME as a regression seed).
# Each target ends with one line `//tests/fuzz:NAME_fuzzer PASSED|FAILED (...)`, which
# tools/test_summary.py counts (the README's test command runs every target for a few seconds).
# Usage: tools/fuzz.sh [SECONDS] [NAME...]   (default 60 s, every target)
set -uo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ "${#targets[@]}" -eq 0 ] && targets=(rest_request error_file kv_put rendezvous command_line job_request stored_job heartbeat_datagram)
command -v clang-14 >/dev/null || { echo "fuzz: clang-14 is not installed (tools/setup.sh)"; exit 1; }
base="${DDP_FUZZ_OUTPUT_BASE:-$HOME/.cache/bazel-fuzz}"
labels=()
for t in "${targets[@]}"; do labels+=("//tests/fuzz:${t}_fuzzer"); done
# No convenience symlinks: bazel-bin and friends keep pointing at the main
# build (symlinks into another output base would make //... see a foreign
# execroot).
bazel --output_base="$base" build --config=fuzz --symlink_prefix=/ "${labels[@]}" 2>&1 | tail -n 3
bin="$(bazel --output_base="$base" info --config=fuzz bazel-bin 2>/dev/null)"
work="$(mktemp -d -t ddp-fuzz.XXXXXX)"
status=0
for t in "${targets[@]}"; do
  mkdir -p "$work/$t/corpus" "$work/$t/crashes"
  cp tests/fuzz/corpus/"$t"/* "$work/$t/corpus/" 2>/dev/null
  echo "== $t ($seconds s)"
  if "$bin/tests/fuzz/${t}_fuzzer" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$work/$t/crashes/" "$work/$t/corpus" >"$work/$t/log" 2>&1; then
    verdict=PASSED
  else
    status=1
    verdict=FAILED
    echo "fuzz: $t FAILED; the input is in $work/$t/crashes/; log tail:"
  fi
  grep -aE "stat::number_of_executed_units|stat::peak_rss_mb|cov:|ERROR|SUMMARY" "$work/$t/log" | tail -n 4
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t/log" | tail -n 1)
  echo "//tests/fuzz:${t}_fuzzer $verdict (${runs:-0} inputs in $seconds s)"
done
echo "fuzz: work dir $work"
exit "$status"
