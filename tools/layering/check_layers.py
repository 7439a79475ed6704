#!/usr/bin/env python3
"""The house's layering, checked on the source tree (not on BUILD deps, which a
transitive dependency can hide): every #include of a first-party header, from a
non-test source, must point at the same package or at one in a layer below, the
packages' include graph has no cycle, and the cores include no gRPC, HTTP or
SQLite header.

Run by Bazel (//tools/layering:layering_test, never cached: its input is the whole
tree) or by hand: tools/layering/check_layers.py [--graph]. Exit 0: clean; 1: each
violation printed with the file and line that makes it.
"""
import collections
import os
import re
import sys

# Lowest first. A package may include packages of its own layer or below.
LAYERS = [
    ("foundation", ["common", "common/heartbeat"]),
    # Plain C++ cores: no gRPC, HTTP or SQLite (CORE_LAYERS).
    ("cores", ["coordinator/kv", "coordinator/rendezvous", "coordinator/auth",
               "coordinator/fleet", "client", "client/prewarm"]),
    # One transaction for the KV and the job state (the Ready loop).
    ("commit", ["coordinator/commit"]),
    ("storage", ["coordinator/storage", "coordinator/storage/etcd"]),
    # Transports and the adapters that turn their messages into core calls.
    ("adapters", ["coordinator/rpc", "coordinator/session", "coordinator/http",
                  "coordinator/metrics", "coordinator/ha", "client/agent"]),
    # Composition roots: wire everything together.
    ("roots", ["coordinator/server", "coordinator", "client/ddp_client"]),
]
CORE_LAYERS = {"cores", "commit"}
FOREIGN = [
    ("gRPC", re.compile(r"^(grpcpp?/|.*\.grpc\.pb\.h$)")),
    ("HTTP", re.compile(r"^(httplib\.h|civetweb\.h)")),
    ("SQLite", re.compile(r"^sqlite3\.h")),
]
# Trees outside the layering (tests, tools, examples may include anything).
OUTSIDE = ("tests/", "tools/", "examples/", "third_party/", "proto/")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def repo_root():
    here = os.path.dirname(os.path.realpath(__file__))
    return os.path.dirname(os.path.dirname(here))


def package_of(root, rel):
    d = os.path.dirname(rel)
    while d and not os.path.exists(os.path.join(root, d, "BUILD.bazel")):
        d = os.path.dirname(d)
    return d


def is_test_source(rel):
    name = os.path.basename(rel)
    return (name.endswith(("_test.cc", "_test.h", "_benchmark.cc")) or "/testing/" in rel
            or name.startswith("test_"))


def main():
    root = repo_root()
    layer_of = {}
    for i, (name, packages) in enumerate(LAYERS):
        for p in packages:
            layer_of[p] = (i, name)
    problems = []
    edges = collections.defaultdict(dict)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "bazel-"))]
        for f in filenames:
            if not f.endswith((".h", ".cc")):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), root)
            if rel.startswith(OUTSIDE) or is_test_source(rel):
                continue
            src = package_of(root, rel)
            if src not in layer_of:
                problems.append("%s: package %s is in no layer (add it to LAYERS in %s)" %
                                (rel, src or "//", os.path.relpath(__file__, root)))
                continue
            text = open(os.path.join(root, rel), errors="replace").read()
            for m in INCLUDE.finditer(text):
                inc = m.group(1)
                line = text.count("\n", 0, m.start()) + 1
                where = "%s:%d" % (rel, line)
                if layer_of[src][1] in CORE_LAYERS:
                    for what, pattern in FOREIGN:
                        if pattern.match(inc):
                            problems.append("%s: the core package %s includes %s (%s)" %
                                            (where, src, inc, what))
                if inc.startswith(OUTSIDE) and os.path.exists(os.path.join(root, inc)):
                    problems.append("%s: production code includes %s (tests/tools)" % (where, inc))
                    continue
                if not os.path.exists(os.path.join(root, inc)) or inc.startswith(OUTSIDE):
                    continue
                dst = package_of(root, inc)
                if dst == src:
                    continue
                edges[src].setdefault(dst, where)
                if dst in layer_of and layer_of[dst][0] > layer_of[src][0]:
                    problems.append("%s: %s (layer %s) includes %s of %s (layer %s, above it)" %
                                    (where, src, layer_of[src][1], inc, dst, layer_of[dst][1]))
    # Cycles among packages of one layer (Tarjan's strongly connected components).
    index, low, stack, on, counter = {}, {}, [], set(), [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                problems.append("package cycle: " + " ".join(
                    "%s -> %s (%s);" % (a, b, edges[a][b]) for a in sorted(component)
                    for b in sorted(edges[a]) if b in component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    if "--graph" in sys.argv:
        for a in sorted(edges):
            print("%-28s -> %s" % (a, " ".join(sorted(edges[a]))))
    for p in problems:
        print(p)
    print("layering: %d packages, %d include edges between packages, %d problems" %
          (len(edges), sum(len(v) for v in edges.values()), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
