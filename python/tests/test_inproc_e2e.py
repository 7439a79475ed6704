"""In-process restart end to end (ddp-client --in-process-restart, ddp_coordinator.recovery):
two real agents x 2 gloo workers of a deterministic DDP training (tests/inproc_train.py).
Rank 3 fails in the middle: ranks 0-2 keep their processes, rank 3 alone starts again and
gets the survivors' model and optimizer state over the new process group, and the run ends
with exactly the parameters of the same run without a failure; the restart is charged to
the job's budget as a full restart's would be."""
import json
import os
import signal
import subprocess
import time

import pytest

pytest.importorskip("torch")

import ddp_coordinator as ddpc  # noqa: E402
from conftest import bazel_binary, wait_agents  # noqa: E402

_WAIT_S = 120  # bound of every poll below

HERE = os.path.dirname(os.path.abspath(__file__))
AGENT_TIMEOUT_S = 240
STEPS = 16


def start_agent(coordinator, work, node, job, flags, script_args):
    env = dict(os.environ, PYTHON_EXEC="/usr/bin/python3", GLOO_SOCKET_IFNAME="lo",
               PYTHONPATH=os.path.dirname(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = open(work / f"{node}.log", "w")
    return subprocess.Popen(
        [bazel_binary("client/agent", "ddp-client"), "--coordinator", coordinator.address,
         "--job", job, "--node-id", node, "--local-addr", "127.0.0.1",
         "--log-dir", str(work / "logs"),
         "--rdzv-conf", "heartbeat_timeout=3,last_call_timeout=1,join_timeout=60",
         "--shutdown-timeout", "3", "--connect-timeout", "30", "--nnodes", "2",
         "--nproc-per-node", "2", "--max-restarts", "2", *flags,
         os.path.join(HERE, "inproc_train.py"), *script_args],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def train(coordinator, work, job, flags, fail_at_step, extra_script_args=()):
    """Runs the training under two agents; returns (per-rank results, the agents' logs)."""
    work.mkdir()
    results = work / "results"
    results.mkdir()
    script = ["--steps", str(STEPS), "--fail-at-step", str(fail_at_step), "--fail-rank", "3",
              "--result-dir", str(results), *extra_script_args]
    agents = [start_agent(coordinator, work, node, job, flags, script)
              for node in ("node-a", "node-b")]
    codes = wait_agents(agents, AGENT_TIMEOUT_S)
    logs = "\n".join((work / f"{n}.log").read_text() for n in ("node-a", "node-b"))
    assert codes == [0, 0], logs
    return [json.loads((results / f"rank{r}.json").read_text()) for r in range(4)], logs


def test_InProcessRestart_RankFailsMidRun_SurvivorsKeepProcessesSameParameters(coordinator,
                                                                             tmp_path):
    reference, _ = train(coordinator, tmp_path / "reference", "inproc-reference",
                         ["--in-process-restart"], fail_at_step=-1)
    outcome, logs = train(coordinator, tmp_path / "failure", "inproc-failure",
                          ["--in-process-restart"], fail_at_step=STEPS // 2)

    assert [r["step"] for r in outcome] == [STEPS] * 4
    # Ranks 0-2 ran both generations in one process each; rank 3 is a new process that ran
    # the second only and got the survivors' state.
    assert [r["survivor"] for r in outcome] == [True, True, True, False], outcome
    assert [len(r["generations"]) for r in outcome] == [2, 2, 2, 1], outcome
    assert all(r["replaced_ranks"] == [3] for r in outcome), outcome
    assert "in-process restart: local ranks 0,1 left the process group" in logs, logs
    assert "kept local ranks 0, started 1" in logs, logs
    # Exactly the parameters of the run without a failure, on every rank.
    for rank in range(4):
        assert outcome[rank]["parameters"] == reference[0]["parameters"], rank

    with ddpc.Client(coordinator.address) as client:
        failed_once = client.jobs.get("inproc-failure")
        clean = client.jobs.get("inproc-reference")
    assert failed_once.state == ddpc.JobState.SUCCEEDED
    assert failed_once.restart_count == 1  # charged as a full restart
    assert clean.restart_count == 0
    # The failure recorded as any: rank 3's exit code 3; the survivors' stops are none.
    assert [(f.global_rank, f.exit_code) for f in failed_once.failures] == [(3, 3)], \
        failed_once.failures


def test_InProcessRestart_SurvivorNotBackInTime_StoppedAndStartedAgain(coordinator, tmp_path):
    """Rank 0 swallows the error and never leaves the group: past
    --in-process-restart-timeout it is stopped and started again as without the flag, and the
    run still ends with the parameters of a run without a failure (it gets the state of rank
    1, the lowest survivor)."""
    reference, _ = train(coordinator, tmp_path / "reference", "stubborn-reference", [],
                         fail_at_step=-1)
    outcome, logs = train(coordinator, tmp_path / "failure", "stubborn-failure",
                          ["--in-process-restart", "--in-process-restart-timeout", "1"],
                          fail_at_step=STEPS // 2, extra_script_args=["--stubborn-rank", "0"])
    assert [r["survivor"] for r in outcome] == [False, True, True, False], outcome
    assert all(r["replaced_ranks"] == [0, 3] for r in outcome), outcome
    assert "local ranks 1 left the process group and wait for the next generation" in logs, logs
    assert "stopped local ranks 0" in logs, logs
    for rank in range(4):
        assert outcome[rank]["parameters"] == reference[0]["parameters"], rank


def test_InProcessRestart_ScriptWithoutWrapper_EveryWorkerRestarts(coordinator, tmp_path):
    """The flag changes nothing for a script that does not run under recovery.run."""
    work = tmp_path
    results = work / "results"
    results.mkdir()
    env = dict(os.environ, PYTHON_EXEC="/usr/bin/python3", GLOO_SOCKET_IFNAME="lo",
               PYTHONPATH=os.path.dirname(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    agents = []
    for node in ("node-a", "node-b"):
        agents.append(subprocess.Popen(
            [bazel_binary("client/agent", "ddp-client"), "--coordinator", coordinator.address,
             "--job", "no-wrapper", "--node-id", node, "--local-addr", "127.0.0.1",
             "--log-dir", str(work / "logs"),
             "--rdzv-conf", "heartbeat_timeout=3,last_call_timeout=1,join_timeout=60",
             "--shutdown-timeout", "3", "--nnodes", "2", "--nproc-per-node", "1",
             "--max-restarts", "2", "--in-process-restart",
             os.path.join(HERE, "store_train.py"), "--steps", "6", "--fail-at-step", "3",
             "--fail-rank", "1", "--result-dir", str(results)],
            env=env, stdout=open(work / f"{node}.log", "w"), stderr=subprocess.STDOUT,
            start_new_session=True))
    codes = wait_agents(agents, AGENT_TIMEOUT_S)
    logs = "\n".join((work / f"{n}.log").read_text() for n in ("node-a", "node-b"))
    assert codes == [0, 0], logs
    outcome = [json.loads((results / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["restart"] for r in outcome] == [1, 1], outcome  # both are new processes
    assert "in-process restart" not in logs, logs


def read_json(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def poll(what, predicate, logs):
    deadline = time.monotonic() + _WAIT_S
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"{what}: not within {_WAIT_S} s\n{logs()}")


def test_InProcessRestart_NodeLostHotSpareStepsIn_SurvivorsKeepProcesses(coordinator, tmp_path):
    """Two members and a hot spare, all with --in-process-restart; the agent of one member
    is killed -9 while training (its node gone; its workers die with it). The survivors on
    the other node park and keep their processes (same pids) through the change of
    membership, the spare's workers take the lost node's ranks and get the survivors'
    state, and the run finishes with every rank at the last step with the same
    parameters."""
    work = tmp_path
    results = work / "results"
    results.mkdir()
    steps = 24
    script = ["--steps", str(steps), "--step-delay", "0.4", "--result-dir", str(results)]
    # --hang-timeout 0: on a loaded machine the survivors may wait in init_process_group
    # for the spare's new ranks longer than the per-node hang rule's 10 s without CPU.
    flags = ["--in-process-restart", "--hang-timeout", "0"]
    agents = {node: start_agent(coordinator, work, node, "inproc-spare", flags, script)
              for node in ("node-a", "node-b")}

    def logs():
        return "\n".join(f"--- {n}\n" + (work / f"{n}.log").read_text()
                         for n in ("node-a", "node-b", "node-c") if (work / f"{n}.log").exists())

    try:
        before = poll("all four ranks training",
                      lambda: (lambda p: p if all(p) else None)(
                          [read_json(results / f"progress.rank{r}.json") for r in range(4)]),
                      logs)
        agents["node-c"] = start_agent(coordinator, work, "node-c", "inproc-spare",
                                       flags + ["--prewarm", "torch,torch.distributed"],
                                       script)
        poll("node-c waiting as a hot spare",
             lambda: "role SPARE" in (work / "node-c.log").read_text(), logs)
        before = [read_json(results / f"progress.rank{r}.json") for r in range(4)]
        assert all(p["step"] < steps - 6 for p in before), f"training too far: {before}"
        # The node of rank 3 goes: its agent killed -9 (the workers follow by PDEATHSIG).
        victim = next(n for n, a in agents.items() if a.pid == before[3]["ppid"])
        lost = [r for r in range(4) if before[r]["ppid"] == agents[victim].pid]
        kept = [r for r in range(4) if r not in lost]
        os.kill(agents[victim].pid, signal.SIGKILL)
        agents[victim].wait()
        others = [n for n in agents if n != victim]
        codes = wait_agents([agents[n] for n in others], AGENT_TIMEOUT_S)
    finally:
        wait_agents(list(agents.values()), 1)
    assert codes == [0, 0], logs()

    outcome = [json.loads((results / f"rank{r}.json").read_text()) for r in range(4)]
    assert [r["step"] for r in outcome] == [steps] * 4, outcome
    for r in kept:  # the same processes ran both generations
        assert outcome[r]["pid"] == before[r]["pid"], (r, outcome[r], before[r])
        assert outcome[r]["survivor"] and len(outcome[r]["generations"]) == 2, outcome[r]
    for r in lost:  # new processes of the spare, started once
        assert outcome[r]["pid"] != before[r]["pid"], (r, outcome[r], before[r])
        assert not outcome[r]["survivor"] and len(outcome[r]["generations"]) == 1, outcome[r]
    assert all(r["replaced_ranks"] == lost for r in outcome), outcome
    for r in range(1, 4):
        assert outcome[r]["parameters"] == outcome[0]["parameters"], r
    survivors_log = (work / f"{others[0]}.log").read_text()
    assert "local ranks 0,1 left the process group" in survivors_log, logs()
    assert "kept local ranks 0,1, started \n" in survivors_log + "\n", logs()
