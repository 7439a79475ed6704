#!/bin/bash
# Installs ddp-coordinator under PREFIX, where a node expects it:
#
#   PREFIX/bin/coordinator, PREFIX/bin/ddp-client, PREFIX/bin/ddpctl
#   PREFIX/lib/python3/dist-packages/ddp_coordinator/   (generated stubs included;
#       ddp-client puts it on its workers' PYTHONPATH; on Debian /usr and /usr/local's
#       lib/python3/dist-packages are on /usr/bin/python3's path already)
#   PREFIX/share/doc/ddp-coordinator/                    (README.md, docs/*.md)
#   PREFIX/share/ddp-coordinator/examples/train_ddp.py
#
# ddp-client alone is enough on a training node: it serves the coordinator of
# --standalone, the c10d form and the static form from its own executable.
#
# Run it through Bazel, which builds what it copies:
#   bazel run --config=release //:install -- PREFIX      # e.g. /usr/local, /opt/ddp
# PREFIX relative to the directory bazel was run from. Safe to run again (it
# overwrites). Exit 0 installed, 2 bad arguments, 1 a copy failed.
set -euo pipefail

usage() {
  echo "usage: bazel run //:install -- PREFIX   (installs bin/, lib/python3/dist-packages/," \
    "share/doc/ddp-coordinator/ under PREFIX)" >&2
  exit 2
}
[[ $# -eq 1 && -n "$1" && "$1" != -* ]] || usage
prefix=$1
if [[ "$prefix" != /* ]]; then
  prefix="${BUILD_WORKING_DIRECTORY:-$PWD}/$prefix"
fi

# The files come from this script's Bazel runfiles (workspace ddp_coordinator).
root=""
for candidate in "$0.runfiles/ddp_coordinator" "${RUNFILES_DIR:-}/ddp_coordinator" \
  "${TEST_SRCDIR:-}/ddp_coordinator"; do
  if [[ -x "$candidate/client/agent/ddp-client" ]]; then
    root=$candidate
    break
  fi
done
if [[ -z "$root" ]]; then
  echo "install: the built files are not beside $0; run it as" \
    "'bazel run //:install -- PREFIX'" >&2
  exit 2
fi

# coreutils' install by its path: this script is itself named `install` (//:install).
copy=/usr/bin/install
bin="$prefix/bin"
python="$prefix/lib/python3/dist-packages"
doc="$prefix/share/doc/ddp-coordinator"
examples="$prefix/share/ddp-coordinator/examples"
"$copy" -d "$bin" "$python/ddp_coordinator/_proto" "$doc" "$examples"
"$copy" -m 0755 "$root/coordinator/coordinator" "$root/client/agent/ddp-client" \
  "$root/tools/ddpctl/ddpctl" "$bin/"
"$copy" -m 0644 "$root"/python/ddp_coordinator/*.py "$python/ddp_coordinator/"
"$copy" -m 0644 "$root"/python/ddp_coordinator/_proto/*.py "$python/ddp_coordinator/_proto/"
"$copy" -m 0644 "$root/README.md" "$root"/docs/*.md "$doc/"
"$copy" -m 0644 "$root/examples/train_ddp.py" "$examples/"
echo "installed ddp-coordinator into $prefix: $bin/{coordinator,ddp-client,ddpctl}," \
  "$python/ddp_coordinator, $doc"
