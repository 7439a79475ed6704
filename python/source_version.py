#!/usr/bin/env python3
"""The ddp_coordinator package's version, ``0.1.0+<hash>``: the hash of its sources and of
the protos its stubs come from. setup.py stamps it on the installed package; tools/setup.sh
compares it with the installed one to reinstall only when something changed. Prints it."""
import glob
import hashlib
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))


def base_version(here=HERE):
    """The release number, from common/version.h (the one place it is written)."""
    path = os.path.join(here, "..", "common", "version.h")
    with open(path) as header:
        match = re.search(r'kVersion\[\] = "([^"]+)"', header.read())
    if not match:
        raise RuntimeError(f"no kVersion in {path}")
    return match.group(1)


def source_files(here=HERE):
    files = glob.glob(os.path.join(here, "ddp_coordinator", "*.py"))
    files += [os.path.join(here, name) for name in ("setup.py", "generate_stubs.py")]
    files += glob.glob(os.path.join(here, "..", "proto", "ddp", "v1", "*.proto"))
    return sorted(files)


def version(here=HERE):
    digest = hashlib.sha256()
    for path in source_files(here):
        digest.update(os.path.relpath(path, here).encode() + b"\0")
        with open(path, "rb") as f:
            digest.update(f.read())
    return f"{base_version(here)}+{digest.hexdigest()[:12]}"


if __name__ == "__main__":
    print(version())
