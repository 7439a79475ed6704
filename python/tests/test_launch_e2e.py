"""detectron2's launch() through ddp-client: a detectron2-style script (its imports changed,
nothing else) on 2 "machines" x 2 processes of this host, with one injected failure that
restarts the whole group; and on one machine with dist_url="auto"."""
import json
import os
import socket
import subprocess
import sys

import pytest

from conftest import bazel_binary

pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "scripts", "d2_train.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_machines(work, argv_per_machine, timeout=240):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE),
               DDP_CLIENT=bazel_binary("client/agent", "ddp-client"))
    machines = []
    for index, argv in enumerate(argv_per_machine):
        log = open(os.path.join(work, f"machine{index}.log"), "w")
        machines.append(subprocess.Popen([sys.executable, SCRIPT, "--output", str(work), *argv],
                                         env=env, stdout=log, stderr=subprocess.STDOUT))
    codes = []
    for machine in machines:
        try:
            codes.append(machine.wait(timeout))
        except subprocess.TimeoutExpired:
            for other in machines:
                other.kill()
            pytest.fail(f"a machine still runs after {timeout} s; logs in {work}")
    return codes


def logs(work):
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(work.glob("*.log")))


def records(work):
    with open(work / "ranks.jsonl") as f:
        return sorted((json.loads(line) for line in f), key=lambda r: r["rank"])


def test_launch_TwoMachines_RanksAsDetectron2AndRecoversFromAFailure(tmp_path):
    url = f"tcp://127.0.0.1:{free_port()}"
    marker = tmp_path / "failed-once"
    codes = run_machines(tmp_path, [
        ["--num-gpus", "2", "--num-machines", "2", "--machine-rank", str(m), "--dist-url", url,
         "--fail-once", str(marker)] for m in (0, 1)])
    assert codes == [0, 0], logs(tmp_path)
    assert marker.exists()
    ranks = records(tmp_path)  # only the restarted generation got past the failure
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3], logs(tmp_path)
    for r in ranks:
        assert r["rank"] == r["machine_rank"] * 2 + r["local_rank"]  # detectron2's numbering
        assert (r["world_size"], r["local_size"], r["restart"]) == (4, 2, 1)
        assert r["main"] == (r["rank"] == 0)
        assert r["all_gather"] == [{"rank": k, "local_rank": k % 2} for k in range(4)]
    assert len({r["seed"] for r in ranks}) == 1  # shared_random_seed agrees
    assert ranks[0]["gather"] == [0, 1, 2, 3] and all(r["gather"] == [] for r in ranks[1:])
    assert ranks[0]["loss"] is not None  # reduce_dict's average, on rank 0


def test_launch_OneMachineAuto_RunsEveryProcess(tmp_path):
    codes = run_machines(tmp_path, [["--num-gpus", "2", "--dist-url", "auto"]])
    assert codes == [0], logs(tmp_path)
    ranks = records(tmp_path)
    assert [(r["rank"], r["local_rank"], r["world_size"], r["restart"]) for r in ranks] == [
        (0, 0, 2, 0), (1, 1, 2, 0)]
