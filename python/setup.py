"""pip install of the ddp_coordinator package (tools/setup.sh runs
``pip install --no-deps --no-build-isolation python/``, offline). The protobuf and gRPC
modules are generated from ../proto/ddp/v1 at build time by generate_stubs.py with Debian's
protoc and grpc_python_plugin; the dependencies are Debian's python3-grpcio and
python3-protobuf."""
import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate_stubs  # noqa: E402
import source_version  # noqa: E402


class BuildWithStubs(build_py):
    """build_py, then the generated modules into the build folder."""

    def run(self):
        super().run()
        generate_stubs.generate(os.path.join(HERE, "..", "proto"), self.build_lib)
        with open(os.path.join(self.build_lib, "ddp_coordinator", "_version.py"), "w") as out:
            out.write(f'"""Written by setup.py."""\n__version__ = "{source_version.version()}"\n')


setup(
    name="ddp-coordinator",
    version=source_version.version(),
    description="Python client, worker API and torch.distributed integration of ddp-coordinator",
    packages=["ddp_coordinator"],
    python_requires=">=3.9",
    install_requires=["grpcio>=1.51", "protobuf>=3.21"],
    cmdclass={"build_py": BuildWithStubs},
    # torchrun --rdzv-backend ddp (PyTorch >= 2.5 discovers rendezvous handlers here;
    # older releases: python3 -m ddp_coordinator.torchrun, docs/python.md).
    entry_points={"torchrun.handlers": ["ddp = ddp_coordinator.torchrun:handler_creator"]},
)
