"""ddp_coordinator.recovery's state handover over a real gloo group (3 processes): the lowest
survivor's state reaches the new ranks, and only them."""
import os
import socket

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from ddp_coordinator import recovery  # noqa: E402


def _unused_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank, world, port, survivors, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        model = torch.nn.Linear(4, 2)
        with torch.no_grad():
            for p in model.parameters():
                p.fill_(float(rank + 1))  # every rank's own values
        state = {"model": model, "step": 100 + rank}
        replaced = recovery._sync_state(dist, torch, state, rank in survivors,
                                        recovery._default_state_dict,
                                        recovery._default_load_state_dict)
        out.put((rank, replaced, float(model.weight[0, 0]), state["step"]))
    finally:
        dist.destroy_process_group()


def _run(world, survivors):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = _unused_port()
    procs = [ctx.Process(target=_rank_main, args=(r, world, port, survivors, out))
             for r in range(world)]
    for p in procs:
        p.start()
    results = {}
    for _ in range(world):
        rank, replaced, weight, step = out.get(timeout=120)
        results[rank] = (replaced, weight, step)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    return results


def test_syncState_NewRankGetsTheLowestSurvivorsState_OtherSurvivorsKeepTheirs():
    results = _run(3, survivors={1, 2})  # rank 0 is new
    assert all(replaced == [0] for replaced, _, _ in results.values()), results
    assert results[0][1:] == (2.0, 101), results  # rank 1's parameters and step
    assert results[1][1:] == (2.0, 101), results
    assert results[2][1:] == (3.0, 102), results  # not overwritten


def test_syncState_AllNew_NothingSent():
    results = _run(2, survivors=set())
    assert results == {0: ([0, 1], 1.0, 100), 1: ([0, 1], 2.0, 101)}, results
