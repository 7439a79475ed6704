"""Fixtures: a real coordinator (bazel-bin/coordinator/coordinator, or the runfiles' copy
under `bazel test`) on a free port with its own data directory."""
import os
import signal
import subprocess
import time

import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# The package of this tree, never an installed copy (under Bazel, PYTHONPATH names the
# runfiles' python/ already; by hand, generate the stubs first: python/generate_stubs.py).
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def bazel_binary(package, name):
    """A binary of this repository: the test's runfiles under Bazel, else bazel-bin."""
    candidates = []
    if os.environ.get("TEST_SRCDIR"):
        candidates.append(os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"],
                                       package, name))
    candidates.append(os.path.join(REPO, "bazel-bin", package, name))
    for path in candidates:
        if os.access(path, os.X_OK):
            return path
    pytest.skip(f"no {name} binary: bazel build //{package}:{name}")


def wait_agents(agents, timeout_s):
    """Waits for each agent process (started with start_new_session); returns their exit
    codes. Any still running when the wait ends (a timeout, a failed assert) is SIGKILLed
    with its process group, so no worker outlives the test."""
    try:
        return [agent.wait(timeout_s) for agent in agents]
    finally:
        for agent in agents:
            if agent.poll() is None:
                os.killpg(agent.pid, signal.SIGKILL)
                agent.wait()


def coordinator_binary():
    return bazel_binary("coordinator", "coordinator")


class Coordinator:
    """A coordinator process; ``restart()`` keeps its data directory and port."""

    def __init__(self, work, extra_args=()):
        self.binary = coordinator_binary()
        self.work = work
        self.data_dir = os.path.join(work, "data")
        self.extra_args = list(extra_args)
        self.port = 0
        self.process = None

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def start(self):
        port_file = os.path.join(self.work, "port")
        if os.path.exists(port_file):
            os.remove(port_file)
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--http-port", "0",
             "--port-file", port_file, "--data-dir", self.data_dir, *self.extra_args],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.work, "coordinator.log"), "a"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the coordinator exited with {self.process.returncode}; "
                                   f"see {self.work}/coordinator.log")
            try:
                with open(port_file) as f:
                    text = f.read().strip()
                if text:
                    self.port = int(text)
                    return self
            except FileNotFoundError:
                pass
            time.sleep(0.02)
        raise RuntimeError("the coordinator wrote no port within 30 s")

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self):
        self.stop()
        return self.start()


@pytest.fixture
def coordinator(tmp_path):
    server = Coordinator(str(tmp_path)).start()
    yield server
    server.stop()


ADMIN_TOKEN = "admin-token-of-the-python-tests"


@pytest.fixture
def secure_coordinator(tmp_path):
    """A coordinator with authorization on (admin token ADMIN_TOKEN)."""
    token_file = tmp_path / "admin_token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    server = Coordinator(str(tmp_path), ["--admin-token-file", str(token_file)]).start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """No DDP_* of the caller's shell leaks into a test."""
    for name in list(os.environ):
        if name.startswith("DDP_"):
            monkeypatch.delenv(name)
