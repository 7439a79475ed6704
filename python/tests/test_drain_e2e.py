"""Drain and preemption end to end (issue 28 points 3-5), real coordinator, agents and
workers: a drained node leaves a running 3-node `--nnodes 2:3` job with no restart counted;
a SIGTERM to an agent with a 10 s grace lets the script write its checkpoint; the straggler
policy drains and excludes the slow node."""
import os
import signal
import subprocess
import time

from conftest import bazel_binary

import ddp_coordinator as ddpc

HERE = os.path.dirname(os.path.abspath(__file__))
EXIT_DRAINED = 4


def start_agent(coordinator, tmp_path, job, node, *flags, script_args=()):
    env = dict(os.environ, PYTHON_EXEC="/usr/bin/python3",
               PYTHONPATH=os.path.dirname(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = open(tmp_path / f"{node}.log", "w")
    return subprocess.Popen(
        [bazel_binary("client/agent", "ddp-client"), "--coordinator", coordinator.address,
         "--job", job, "--node-id", node, "--local-addr", "127.0.0.1",
         "--log-dir", str(tmp_path / "logs" / node), "--nnodes", "2:3", "--nproc-per-node", "1",
         "--rdzv-conf", "last_call_timeout=1", "--shutdown-timeout", "3",
         "--progress-interval", "1", *flags,
         os.path.join(HERE, "scripts", "drain_train.py"), "--stop", str(tmp_path / "stop"),
         "--checkpoint-dir", str(tmp_path), *script_args],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for(condition, timeout_s=60):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            value = condition()
        except ddpc.NotFoundError:
            value = None
        if value:
            return value
        time.sleep(0.2)
    return None


def logs(tmp_path):
    return "\n".join(f"--- {p.name}\n{p.read_text()}" for p in sorted(tmp_path.glob("*.log")))


def running_with(client, job_id, members):
    job = client.jobs.get(job_id)
    return job if (job.state == ddpc.JobState.RUNNING and len(job.members) == members and
                   all(m.group_rank >= 0 for m in job.members)) else None


class ThreeNodes:
    def __init__(self, coordinator, tmp_path, job, *flags, script_args=()):
        self.tmp_path = tmp_path
        self.agents = {n: start_agent(coordinator, tmp_path, job, n, *flags,
                                      script_args=script_args) for n in ("n0", "n1", "n2")}

    def stop(self):
        (self.tmp_path / "stop").write_text("")
        for agent in self.agents.values():
            try:
                agent.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(agent.pid, signal.SIGKILL)
                agent.wait()


def test_drain_NodeLeavesRunning2To3Job_NoRestartCountedNoFailure(coordinator, tmp_path):
    nodes = ThreeNodes(coordinator, tmp_path, "drain")
    try:
        with ddpc.Client(coordinator.address) as client:
            assert wait_for(lambda: running_with(client, "drain", 3), 90), logs(tmp_path)
            began = time.time()
            drained = subprocess.run(
                [bazel_binary("tools/ddpctl", "ddpctl"), "--coordinator", coordinator.address,
                 "nodes", "drain", "n2", "--grace", "120s", "--reason", "kernel update"],
                capture_output=True, text=True, timeout=30)
            assert drained.returncode == 0, drained.stderr
            assert "drains from job(s) drain" in drained.stdout, drained.stdout
            # n2 leaves once every worker wrote its checkpoint and said so: long before the
            # 120 s grace.
            assert nodes.agents["n2"].wait(60) == EXIT_DRAINED, logs(tmp_path)
            job = wait_for(lambda: running_with(client, "drain", 2), 60)
            assert job, logs(tmp_path)
            assert time.time() - began < 60
            assert sorted(m.node_id for m in job.members) == ["n0", "n1"]
            assert job.restart_count == 0
            assert not job.failures, job.failures
            for rank in range(3):
                assert (tmp_path / f"rank{rank}-gen1").read_text().split()[1] == "n2"
    finally:
        nodes.stop()


def test_preemption_SigtermWith10sGrace_ScriptWritesItsCheckpoint(coordinator, tmp_path):
    nodes = ThreeNodes(coordinator, tmp_path, "spot", "--preemption-grace", "10")
    try:
        with ddpc.Client(coordinator.address) as client:
            job = wait_for(lambda: running_with(client, "spot", 3), 90)
            assert job, logs(tmp_path)
            rank_of_n1 = next(m.global_rank_offset for m in job.members if m.node_id == "n1")
            os.kill(nodes.agents["n1"].pid, signal.SIGTERM)
            assert nodes.agents["n1"].wait(30) == 128 + signal.SIGTERM, logs(tmp_path)
            checkpoint = tmp_path / f"rank{rank_of_n1}-gen1"
            assert checkpoint.exists(), logs(tmp_path)
            assert checkpoint.read_text().split()[1] == "n1"
            job = wait_for(lambda: running_with(client, "spot", 2), 60)
            assert job, logs(tmp_path)
            assert job.restart_count == 0 and not job.failures, job
    finally:
        nodes.stop()


def test_stragglerPolicy_SlowNodeDrainedAndExcluded_NoRestartCounted(coordinator, tmp_path):
    nodes = ThreeNodes(coordinator, tmp_path, "slow", "--straggler-exclude-factor", "1.25",
                       "--straggler-exclude-after", "3", script_args=["--slow-node", "1"])
    try:
        with ddpc.Client(coordinator.address) as client:
            job = wait_for(lambda: running_with(client, "slow", 3), 90)
            assert job, logs(tmp_path)
            slow = next(m.node_id for m in job.members if m.group_rank == 1)
            assert nodes.agents[slow].wait(60) == EXIT_DRAINED, logs(tmp_path)
            job = wait_for(lambda: running_with(client, "slow", 2), 60)
            assert job, logs(tmp_path)
            assert slow not in [m.node_id for m in job.members]
            assert job.excluded_nodes == [slow]
            assert job.restart_count == 0 and not job.failures, job
    finally:
        nodes.stop()
