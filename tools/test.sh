#!/usr/bin/env bash
# The README's test command: installs what is missing, builds everything, runs every test,
# and ends with a plain `N passed, M failed` line (test cases, from the JUnit XML of each
# Bazel test target). Exit status 0 only when everything passed.
set -uo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh || exit 1

start=$(date +%s)
log=$(mktemp -t ddp-test.XXXXXX)
trap 'rm -f "$log"' EXIT

bazel build //... 2>&1 | tail -n 30
build_rc=${PIPESTATUS[0]}
if [ "$build_rc" -ne 0 ]; then
  echo "test: the build failed (bazel exit $build_rc); see the errors above"
fi

bazel test //... "$@" 2>&1 | tee "$log" | grep -E '^(//|Executed|FAIL|ERROR)|PASSED|FAILED|TIMEOUT' | tail -n 200
test_rc=${PIPESTATUS[0]}

# Every fuzz target, built with clang-14 (ASan, UBSan) in its own output base, runs a few
# seconds from its seed corpus; each counts as one test case in the summary. The seed replay
# of each target also runs above, as an ordinary test.
fuzz_rc=0
if command -v clang-14 >/dev/null; then
  tools/fuzz.sh "${DDP_CI_FUZZ_SECONDS:-5}" 2>&1 | tee -a "$log" | grep -E '^(//|fuzz:)'
  fuzz_rc=${PIPESTATUS[0]}
else
  echo "test: fuzz targets skipped: clang-14 is not installed (tools/setup.sh installs it)"
fi

/usr/bin/python3 tools/test_summary.py "$log" "$start"
summary_rc=$?
if [ "$build_rc" -ne 0 ] || [ "$test_rc" -ne 0 ] || [ "$fuzz_rc" -ne 0 ] || [ "$summary_rc" -ne 0 ]; then
  exit 1
fi
exit 0
