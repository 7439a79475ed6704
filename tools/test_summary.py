#!/usr/bin/env python3
"""Turns a `bazel test` log into the plain `N passed, M failed` line that CI reads.

Counts individual test cases from each target's JUnit XML (bazel-testlogs/.../test.xml):
a target that PASSED contributes its cases as passed; a target that did not pass contributes
its failed cases (or 1 failure when it produced no fresh XML, e.g. it failed to build or
timed out). Usage: test_summary.py BAZEL_LOG START_EPOCH_SECONDS
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

STATUS_LINE = re.compile(
    r"^(//\S+)\s+(?:\(cached\)\s+)?(PASSED|FAILED|FLAKY|TIMEOUT|NO STATUS|FAILED TO BUILD|INCOMPLETE|REMOTE FAILURE)\b"
)


def case_counts(xml_path):
    root = ET.parse(xml_path).getroot()
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    total = failed = 0
    for suite in suites:
        for case in suite.iter("testcase"):
            if case.get("status") == "notrun":
                continue
            total += 1
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
    return total, failed


def main():
    log_path, start = sys.argv[1], float(sys.argv[2])
    passed = failed = 0
    failing_targets = []
    with open(log_path, errors="replace") as log:
        for line in log:
            match = STATUS_LINE.match(line.strip())
            if not match:
                continue
            target, status = match.group(1), match.group(2)
            package, _, name = target[2:].partition(":")
            xml_path = os.path.join("bazel-testlogs", package, name, "test.xml")
            fresh = os.path.exists(xml_path) and (
                status == "PASSED" or os.path.getmtime(xml_path) >= start)
            total, bad = case_counts(xml_path) if fresh else (0, 0)
            if status in ("PASSED", "FLAKY"):
                passed += max(total - bad, 1 if total == 0 else 0)
                failed += bad
            else:
                failing_targets.append(f"{target} {status}")
                passed += max(total - bad, 0)
                failed += max(bad, 1)
    for target in failing_targets:
        print(f"not passed: {target}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
