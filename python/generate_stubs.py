#!/usr/bin/env python3
"""Generates the ddp_coordinator package's protobuf and gRPC modules from proto/ddp/v1.

The one generator of the stubs, run by `setup.py` (pip install) and by Bazel (//python:stubs):
Debian's protoc and grpc_python_plugin compile every proto/ddp/v1/*.proto, and the modules
land flat in ddp_coordinator/_proto/ (kv_pb2.py, kv_pb2_grpc.py, ...). protoc writes
`from ddp.v1 import jobs_pb2`, which would need a top-level `ddp` package; those imports are
rewritten to `from ddp_coordinator._proto import jobs_pb2`, so the package owns its stubs and
installs nothing else. The descriptors keep their proto names (ddp/v1/jobs.proto).

Usage: generate_stubs.py --proto-root DIR --out DIR [--protoc PATH] [--grpc-plugin PATH]
  --out is the folder that receives ddp_coordinator/_proto/.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

PACKAGE = "ddp_coordinator._proto"
# The protos of the public API, in proto/ddp/v1 (http.proto: the REST error body).
PROTOS = ("cluster", "http", "jobs", "kv", "nodes", "session")
_IMPORT = re.compile(r"^from ddp\.v1 import (\w+)", re.MULTILINE)


def generate(proto_root, out, protoc="/usr/bin/protoc",
             grpc_plugin="/usr/bin/grpc_python_plugin"):
    """Writes OUT/ddp_coordinator/_proto/{__init__,X_pb2,X_pb2_grpc}.py; returns their paths."""
    protos = [f"ddp/v1/{name}.proto" for name in PROTOS]
    missing = [p for p in protos if not os.path.exists(os.path.join(proto_root, p))]
    if missing:
        raise FileNotFoundError(f"{', '.join(missing)} not found under {proto_root}")
    for tool in (protoc, grpc_plugin):
        if not os.access(tool, os.X_OK):
            raise FileNotFoundError(
                f"{tool} is not installed: apt-get install protobuf-compiler protobuf-compiler-grpc"
                " (tools/setup.sh does)")
    target = os.path.join(out, *PACKAGE.split("."))
    os.makedirs(target, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        subprocess.run([protoc, f"-I{proto_root}", f"--python_out={work}", f"--grpc_out={work}",
                        f"--plugin=protoc-gen-grpc={grpc_plugin}", *protos], check=True)
        written = []
        for path in sorted(glob.glob(os.path.join(work, "ddp", "v1", "*.py"))):
            with open(path) as f:
                text = _IMPORT.sub(rf"from {PACKAGE} import \1", f.read())
            dest = os.path.join(target, os.path.basename(path))
            with open(dest, "w") as f:
                f.write(text)
            written.append(dest)
    init = os.path.join(target, "__init__.py")
    with open(init, "w") as f:
        f.write('"""Generated from proto/ddp/v1 by python/generate_stubs.py. Do not edit."""\n')
    return [init] + written


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--proto-root", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--protoc", default=shutil.which("protoc") or "/usr/bin/protoc")
    parser.add_argument("--grpc-plugin", default="/usr/bin/grpc_python_plugin")
    args = parser.parse_args(argv)
    generate(args.proto_root, args.out, args.protoc, args.grpc_plugin)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
