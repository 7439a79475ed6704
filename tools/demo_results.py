#!/usr/bin/env python3
"""Prints the demo's per-rank results and checks that every rank ended with the same
parameters. Usage: demo_results.py RESULT_DIR. Exit 0 when all ranks agree."""
import glob
import json
import os
import sys


def main():
    results = [json.load(open(path)) for path in sorted(glob.glob(os.path.join(sys.argv[1], "rank*.txt")))]
    if not results:
        print("demo: FAILED: no rank wrote a result", file=sys.stderr)
        return 1
    for r in results:
        print(f"  rank {r['rank']} of {r['world_size']}: restart {r['restart']}, "
              f"params sha256 {r['checksum'][:16]}")
    expected = results[0]["world_size"]
    if len(results) != expected or len({r["checksum"] for r in results}) != 1:
        print(f"demo: FAILED: {len(results)} of {expected} ranks reported, "
              f"{len({r['checksum'] for r in results})} distinct parameter checksums", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
