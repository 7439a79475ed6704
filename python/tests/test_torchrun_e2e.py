"""torchrun (Debian's PyTorch 1.13) with ``--rdzv_backend ddp``: two agents rendezvous
through a real coordinator, a worker failure restarts both, a spent budget fails the job, a
coordinator restart costs no restart, and the job is there for ``ddpctl jobs get`` and REST
(what the dashboard reads)."""
import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

import ddp_coordinator as ddpc
from conftest import Coordinator, bazel_binary

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "scripts", "ddp_train.py")
PACKAGE_ROOT = os.path.dirname(HERE)


@pytest.fixture
def coordinator_with_http(tmp_path):
    """A coordinator that also serves REST and the dashboard (the same job data)."""
    port_file = tmp_path / "http_port"
    server = Coordinator(str(tmp_path), ["--http-port", "-1", "--http-port-file",
                                         str(port_file)]).start()
    server.http_port_file = port_file
    yield server
    server.stop()


def start_agent(coordinator, job, node_id, work, extra_env=None, max_restarts=2):
    env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT, RESULT_DIR=str(work), **(extra_env or {}))
    # torch 1.13 spells its flags with underscores; -r 1 -t 1: its defaults crash on
    # Python 3.11 (Std.from_str).
    command = [sys.executable, "-m", "ddp_coordinator.torchrun", "--nnodes", "2",
               "--nproc_per_node", "2", "--rdzv_backend", "ddp",
               "--rdzv_endpoint", coordinator.address, "--rdzv_id", job,
               "--rdzv_conf", f"node_id={node_id},local_addr=127.0.0.1",
               "--max_restarts", str(max_restarts), "--monitor_interval", "0.5",
               "-r", "1", "-t", "1", TRAIN]
    log = open(os.path.join(work, f"agent-{node_id}.log"), "w")
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_all(agents, work, timeout=240):
    codes = []
    for node_id, agent in agents:
        try:
            codes.append(agent.wait(timeout))
        except subprocess.TimeoutExpired:
            for _, other in agents:
                other.kill()
            pytest.fail(f"torchrun agent {node_id} still runs after {timeout} s; logs in {work}")
    return codes


def agent_logs(work):
    text = []
    for name in sorted(os.listdir(work)):
        if name.startswith("agent-"):
            with open(os.path.join(work, name)) as f:
                text.append(f"--- {name}\n{f.read()[-3000:]}")
    return "\n".join(text)


def ddpctl(coordinator, *args):
    binary = bazel_binary("tools/ddpctl", "ddpctl")
    return subprocess.run([binary, "--coordinator", coordinator.address, *args],
                          capture_output=True, text=True, timeout=30)


def test_torchrun_WorkerFailure_RestartsBothAgentsThroughTheCoordinator(coordinator_with_http,
                                                                         tmp_path):
    coordinator = coordinator_with_http
    work = tmp_path
    marker = work / "failed-once"
    agents = [(n, start_agent(coordinator, "torchrun-job", n, work,
                              {"FAIL_ONCE_MARKER": str(marker)})) for n in ("a", "b")]
    codes = wait_all(agents, work)
    assert codes == [0, 0], agent_logs(work)
    assert marker.exists()  # the last rank did fail once
    results = sorted(p.read_text().split() for p in work.glob("rank*"))
    assert len(results) == 4, agent_logs(work)
    # Every rank of the second generation: world size 4, restart 1, both group ranks, and
    # the same weights (DDP kept them in step).
    assert {r[0] for r in results} == {"4"}
    # TORCHELASTIC_RESTART_COUNT is each torchrun agent's own count: the agent whose worker
    # failed counts 1; the other counts 1 when its workers failed too (gloo saw the peer
    # go) and 0 when it restarted them first for the waiting node (a membership change,
    # which torchrun does not count). The coordinator's count is the job's (below).
    assert {r[1] for r in results} <= {"0", "1"} and "1" in {r[1] for r in results}
    assert sorted(r[2] for r in results) == ["0", "0", "1", "1"]
    assert len({r[3] for r in results}) == 1

    shown = ddpctl(coordinator, "jobs", "get", "torchrun-job")
    assert shown.returncode == 0, shown.stderr
    assert "SUCCEEDED" in shown.stdout
    assert "generation:  2" in shown.stdout
    assert "restarts:    1/2" in shown.stdout
    # The failure torchrun's agent saw, with its local and global rank and exit code (reported
    # even when the other node's knock-on exits restarted the generation first).
    assert "global rank 3" in shown.stdout and "exit code 3" in shown.stdout, shown.stdout
    for node_id in ("a", "b"):
        assert f"\n  {node_id} " in shown.stdout
    # REST, which the dashboard reads: the same job, its members and its failure.
    http_port = int(coordinator.http_port_file.read_text())
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/v1/jobs/torchrun-job",
                                timeout=10) as reply:
        job = json.load(reply)
    assert job["state"] == "SUCCEEDED" and job["restartCount"] == 1, job
    assert sorted(m["nodeId"] for m in job["members"]) == ["a", "b"], job
    # The injected failure (its peers' knock-on exits may be reported too, in either order).
    assert any(f["exitCode"] == 3 and f["globalRank"] == "3" for f in job["failures"]), job


def test_torchrun_BudgetSpent_FailsTheJobOnEveryAgent(coordinator, tmp_path):
    work = tmp_path
    agents = [(n, start_agent(coordinator, "torchrun-fails", n, work,
                              {"FAIL_ONCE_MARKER": str(work / "failed-once")}, max_restarts=0))
              for n in ("a", "b")]
    codes = wait_all(agents, work)
    assert all(code != 0 for code in codes), agent_logs(work)
    shown = ddpctl(coordinator, "jobs", "get", "torchrun-fails")
    assert "FAILED" in shown.stdout, shown.stdout
    assert "root cause:" in shown.stdout and "exit code 3" in shown.stdout, shown.stdout


def test_torchrun_CoordinatorRestart_ResumesWithoutARestart(coordinator, tmp_path):
    work = tmp_path
    agents = [(n, start_agent(coordinator, "torchrun-resumes", n, work,
                              {"STEP_SECONDS": "1.5"})) for n in ("a", "b")]
    with ddpc.Client(coordinator.address) as client:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if client.jobs.get("torchrun-resumes").state == ddpc.JobState.RUNNING:
                    break
            except ddpc.NotFoundError:
                pass
            time.sleep(0.2)
        else:
            pytest.fail("the job never ran: " + agent_logs(work))
    time.sleep(2)  # the workers are importing torch or training
    coordinator.restart()
    codes = wait_all(agents, work)
    assert codes == [0, 0], agent_logs(work)
    assert len(list(work.glob("rank*"))) == 4
    shown = ddpctl(coordinator, "jobs", "get", "torchrun-resumes")
    assert "SUCCEEDED" in shown.stdout, shown.stdout
    assert "generation:  1" in shown.stdout and "restarts:    0/2" in shown.stdout, shown.stdout
