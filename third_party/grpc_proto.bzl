"""One rule for every proto: runs Debian's protoc and grpc_cpp_plugin.

cc_grpc_proto_library(name, srcs, deps) generates <file>.pb.{h,cc} and
<file>.grpc.pb.{h,cc} for each .proto in srcs (paths relative to this package, which
is the proto import root) and wraps them in two cc_library targets: `name` (the
messages, linked without gRPC) and `name` with `_cc_proto` replaced by `_cc_grpc`
(the services, for transports only). `deps` are other
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
    # The messages alone (no gRPC): what a core that only handles the records
    # depends on.
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".pb.cc") and not o.endswith(".grpc.pb.cc")],
        hdrs = [o for o in outs if o.endswith(".pb.h") and not o.endswith(".grpc.pb.h")],
        includes = ["."],
        deps = deps + ["//third_party:protobuf"],
        visibility = visibility,
    )

    # The services' stubs and base classes (<file>.grpc.pb.h): only transports
    # (servers, clients) depend on these.
    native.cc_library(
        name = name[:-len("_cc_proto")] + "_cc_grpc" if name.endswith("_cc_proto") else name + "_grpc",
        srcs = [o for o in outs if o.endswith(".grpc.pb.cc")],
        hdrs = [o for o in outs if o.endswith(".grpc.pb.h")],
        includes = ["."],
        deps = [":" + name, "//third_party:grpc", "//third_party:protobuf"],
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
        # The imported .proto files of deps (cc_grpc_proto_library targets) too.
        srcs = srcs + [dep + "_protos" for dep in deps],
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
