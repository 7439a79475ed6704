#!/usr/bin/env bash
# //python:python_test: pytest over python/tests with Debian's interpreter, the package from
# the runfiles (generated stubs included), one JUnit case per test for tools/test.sh.
set -euo pipefail
cd "$TEST_SRCDIR/$TEST_WORKSPACE/python"
export PYTHONPATH="$PWD" PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider tests \
  ${XML_OUTPUT_FILE:+--junitxml="$XML_OUTPUT_FILE"} "$@"
