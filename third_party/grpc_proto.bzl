"""One rule for every proto: runs Debian's protoc and grpc_cpp_plugin.

cc_grpc_proto_library(name, srcs, deps) generates <file>.pb.{h,cc} and
<file>.grpc.pb.{h,cc} for each .proto in srcs (paths relative to this package, which
is the proto import root) and wraps them in a cc_library. `deps` are other
cc_grpc_proto_library targets of the same package whose .proto files srcs import.
"""

def cc_grpc_proto_library(name, srcs, deps = [], visibility = None):
    outs = []
    for src in srcs:
        if not src.endswith(".proto"):
            fail("cc_grpc_proto_library: %s is not a .proto file" % src)
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc", base + ".grpc.pb.h", base + ".grpc.pb.cc"]

    package = native.package_name()
    native.filegroup(
        name = name + "_protos",
        srcs = srcs + [dep + "_protos" for dep in deps],
        visibility = visibility,
    )
    native.genrule(
        name = name + "_gen",
        srcs = [name + "_protos"],
        outs = outs,
        cmd = ("/usr/bin/protoc -I{pkg} --cpp_out=$(GENDIR)/{pkg} --grpc_out=$(GENDIR)/{pkg} " +
               "--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin {files}").format(
            pkg = package,
            files = " ".join([package + "/" + s for s in srcs]),
        ),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = ["."],
        deps = deps + ["//third_party:grpc", "//third_party:protobuf"],
        visibility = visibility,
    )

def cc_proto_only_library(name, srcs, deps = [], visibility = None):
    """Messages only (protoc --cpp_out): for protos without services, linked without gRPC."""
    outs = []
    for src in srcs:
        if not src.endswith(".proto"):
            fail("cc_proto_only_library: %s is not a .proto file" % src)
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
    package = native.package_name()
    native.genrule(
        name = name + "_gen",
        srcs = srcs,
        outs = outs,
        cmd = "/usr/bin/protoc -I{pkg} --cpp_out=$(GENDIR)/{pkg} {files}".format(
            pkg = package,
            files = " ".join([package + "/" + s for s in srcs]),
        ),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = ["."],
        deps = deps + ["//third_party:protobuf"],
        visibility = visibility,
    )
