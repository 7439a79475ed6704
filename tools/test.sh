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

/usr/bin/python3 tools/test_summary.py "$log" "$start"
summary_rc=$?
if [ "$build_rc" -ne 0 ] || [ "$test_rc" -ne 0 ] || [ "$summary_rc" -ne 0 ]; then
  exit 1
fi
exit 0
