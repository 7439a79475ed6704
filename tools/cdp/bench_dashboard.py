#!/usr/bin/python3
"""Time to first render of the dashboard's job page in headless Chromium:
from Page.navigate until the members table shows every member row.

  tools/cdp/bench_dashboard.py URL_OF_JOB_PAGE ROWS [--runs N]

Prints one line per run and min/median/max (milliseconds).
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp_browser import Browser  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("rows", type=int, help="member rows the page must show")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if not chromium:
        print("bench_dashboard: chromium is not installed", file=sys.stderr)
        return 1
    profile = tempfile.mkdtemp()
    browser = Browser(chromium, profile)
    count = "document.querySelectorAll('tr[data-node]').length"
    times = []
    try:
        for run in range(args.runs):
            browser.navigate("about:blank")
            start = time.perf_counter()
            browser.navigate(args.url)
            while True:
                rows = browser.evaluate(count) or 0
                if rows >= args.rows:
                    break
                if time.perf_counter() - start > 30:
                    print(f"bench_dashboard: only {rows} of {args.rows} rows after 30 s",
                          file=sys.stderr)
                    return 1
                time.sleep(0.005)
            elapsed = (time.perf_counter() - start) * 1000
            # The page's own mark: from navigation start to the first render
            # (no polling delay in it).
            mark = browser.evaluate(
                "(performance.getEntriesByName('ddp:job-rendered')[0] || {}).startTime")
            rendered = mark if mark is not None else elapsed
            times.append(rendered)
            fetch = browser.evaluate(
                "(performance.getEntriesByType('resource').find(e => e.name.includes('/v1/jobs/'))"
                " || {}).duration")
            print(f"run {run + 1}: first render of {rows} member rows at {rendered:.0f} ms after "
                  f"navigation start (GetJob fetch {fetch or 0:.0f} ms; seen by the poller at "
                  f"{elapsed:.0f} ms)")
    finally:
        browser.close()
    print(f"job page, {args.rows} members, loaded by URL: min {min(times):.0f} ms, "
          f"median {statistics.median(times):.0f} ms, max {max(times):.0f} ms")
    # Warm: from the jobs list (page loaded), open the job as a click does.
    jobs_url, _, job_hash = args.url.partition("#/jobs/")
    browser = Browser(chromium, profile)
    warm = []
    try:
        for run in range(args.runs):
            browser.navigate(f"{jobs_url}#/jobs")
            deadline = time.perf_counter() + 30
            while not browser.evaluate("document.querySelector('tr[data-job]') !== null"):
                if time.perf_counter() > deadline:
                    print("bench_dashboard: the jobs list never showed a job", file=sys.stderr)
                    return 1
                time.sleep(0.01)
            start = browser.evaluate(
                "(() => { performance.clearMarks(); const t = performance.now(); "
                f"location.hash = '#/jobs/{job_hash}'; return t; }})()")
            deadline = time.perf_counter() + 30
            while (browser.evaluate(count) or 0) < args.rows:
                if time.perf_counter() > deadline:
                    print("bench_dashboard: the job page never showed every member",
                          file=sys.stderr)
                    return 1
                time.sleep(0.005)
            mark = browser.evaluate(
                "(performance.getEntriesByName('ddp:job-rendered')[0] || {}).startTime")
            warm.append(mark - start)
            print(f"run {run + 1}: job opened from the jobs list, rendered in {mark - start:.0f} ms")
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)
    print(f"job page, {args.rows} members, opened from the jobs list: min {min(warm):.0f} ms, "
          f"median {statistics.median(warm):.0f} ms, max {max(warm):.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
