"""launch()'s arguments and the ddp-client command it builds; comm as a single process."""
import sys

import pytest

pytest.importorskip("torch")

from ddp_coordinator import comm, launch as launch_module  # noqa: E402
from ddp_coordinator.launch import LaunchError, launch  # noqa: E402


@pytest.fixture
def agent(monkeypatch, tmp_path):
    monkeypatch.setenv("DDP_CLIENT", "/opt/ddp-client")
    script = tmp_path / "train_net.py"
    script.write_text("")
    monkeypatch.setattr(sys, "argv", [str(script), "--lr", "0.1"])
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", None, raising=False)
    return script


def command(**kwargs):
    options = dict(num_gpus=2, num_machines=1, machine_rank=0, dist_url="auto",
                   max_restarts=3, job_id=None)
    options.update(kwargs)
    return launch_module._agent_command(**options)


def test_command_Auto_IsStandaloneAndRerunsTheScript(agent):
    argv = command()
    assert argv[0] == "/opt/ddp-client" and "--standalone" in argv
    assert argv[argv.index("--nproc-per-node") + 1] == "2"
    assert argv[-4:] == ["--run-path", str(agent), "--lr", "0.1"]


def test_command_Tcp_IsTheC10dFormWithTheMachineRank(agent):
    argv = command(num_machines=2, machine_rank=1, dist_url="tcp://head:23456")
    assert argv[argv.index("--rdzv-backend") + 1] == "c10d"
    assert argv[argv.index("--rdzv-endpoint") + 1] == "head:23456"
    assert argv[argv.index("--rdzv-id") + 1] == "train_net-23456"
    assert argv[argv.index("--node-rank") + 1] == "1"
    assert argv[argv.index("--nnodes") + 1] == "2"


def test_command_NoUrl_UsesDdpCoordinator(agent, monkeypatch):
    monkeypatch.setenv("DDP_COORDINATOR", "c1:29400")
    argv = command(num_machines=2, dist_url=None, job_id="j7")
    assert argv[argv.index("--coordinator") + 1] == "c1:29400"
    assert argv[argv.index("--job") + 1] == "j7"


@pytest.mark.parametrize("url", ["auto", None])
def test_command_AutoOnSeveralMachines_IsAnError(agent, monkeypatch, url):
    monkeypatch.delenv("DDP_COORDINATOR", raising=False)
    with pytest.raises(ValueError, match="one machine"):
        command(num_machines=2, dist_url=url)


@pytest.mark.parametrize("url", ["file:///tmp/x", "tcp://head", "tcp://head:99999", "head:1"])
def test_command_BadUrl_NamesIt(agent, url):
    with pytest.raises(ValueError, match="dist_url"):
        command(dist_url=url)


def test_command_NoAgent_SaysWhereToPutIt(agent, monkeypatch):
    monkeypatch.delenv("DDP_CLIENT")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(LaunchError, match="DDP_CLIENT"):
        command()


@pytest.mark.parametrize("kwargs, match", [({"num_gpus_per_machine": 0}, "num_gpus"),
                                           ({"num_machines": 0}, "num_machines"),
                                           ({"machine_rank": 2, "num_machines": 2},
                                            "machine_rank"),
                                           ({"max_restarts": -1}, "max_restarts")])
def test_launch_BadArguments_NameThem(kwargs, match):
    options = dict(num_gpus_per_machine=1)
    options.update(kwargs)
    with pytest.raises(ValueError, match=match):
        launch(lambda: None, **options)


def test_launch_OneProcess_CallsMainHere(monkeypatch):
    monkeypatch.delenv(launch_module.WORKER_ENV, raising=False)
    calls = []
    launch(lambda *a: calls.append(a), 1, args=(1, "x"))
    assert calls == [(1, "x")]


def test_comm_SingleProcess_AnswersAsRankZeroOfOne():
    assert (comm.get_world_size(), comm.get_rank(), comm.get_local_rank(),
            comm.get_local_size()) == (1, 0, 0, 1)
    assert comm.is_main_process()
    comm.synchronize()
    assert comm.all_gather({"a": 1}) == [{"a": 1}] and comm.gather(5) == [5]
    assert 0 <= comm.shared_random_seed() < 2 ** 31
    losses = {"loss": 1.5}
    assert comm.reduce_dict(losses) is losses
