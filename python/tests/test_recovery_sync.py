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


def _spawn(target, world, *args):
    """Runs target(rank, world, port, *args, out) in `world` processes; returns what each
    put on `out`, sorted."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = _unused_port()
    procs = [ctx.Process(target=target, args=(r, world, port, *args, out))
             for r in range(world)]
    for p in procs:
        p.start()
    results = sorted(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    return results


def _run(world, survivors, target=_rank_main):
    return {rank: (replaced, weight, step)
            for rank, replaced, weight, step in _spawn(target, world, survivors)}


def test_syncState_NewRankGetsTheLowestSurvivorsState_OtherSurvivorsKeepTheirs():
    results = _run(3, survivors={1, 2})  # rank 0 is new
    assert all(replaced == [0] for replaced, _, _ in results.values()), results
    assert results[0][1:] == (2.0, 101), results  # rank 1's parameters and step
    assert results[1][1:] == (2.0, 101), results
    assert results[2][1:] == (3.0, 102), results  # not overwritten


def test_syncState_AllNew_NothingSent():
    results = _run(2, survivors=set())
    assert results == {0: ([0, 1], 1.0, 100), 1: ([0, 1], 2.0, 101)}, results


def _ticks_rank_main(rank, world, port, out):
    import signal
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    with recovery._gloo_loop_ticks("gloo") as ticks:
        dist.init_process_group("gloo", rank=rank, world_size=world)
        timers = len(ticks._timers)
    try:
        total = torch.ones(1)
        dist.all_reduce(total)
        out.put((rank, timers, signal.getsignal(signal.SIGURG) == signal.SIG_DFL,
                 float(total)))
    finally:
        dist.destroy_process_group()


def test_glooLoopTicks_GroupForms_OneTimerOnGloosLoopThreadHandlerRestored():
    results = _spawn(_ticks_rank_main, 3)
    # One timer each: gloo's event loop is the one new thread that waits in epoll_wait.
    assert results == [(r, 1, True, 3.0) for r in range(3)], results


def test_glooLoopTicks_SigurgHandledOrOtherBackend_LeftAlone():
    import signal

    def mine(signum, frame):
        pass

    previous = signal.signal(signal.SIGURG, mine)
    try:
        with recovery._gloo_loop_ticks("gloo") as ticks:
            assert signal.getsignal(signal.SIGURG) is mine
        assert ticks._watcher is None and signal.getsignal(signal.SIGURG) is mine
    finally:
        signal.signal(signal.SIGURG, previous)
    with recovery._gloo_loop_ticks("nccl") as ticks:
        assert signal.getsignal(signal.SIGURG) in (signal.SIG_DFL, None)
    assert ticks._watcher is None


def test_survivorRoster_AnnouncedRanksAcrossKeys_ReadByEveryRank():
    store = dist.HashStore()
    roster = recovery._SurvivorRoster(store, 7, world_size=131)
    for rank in (130, 0, 59, 60):
        roster.announce(rank)
    assert roster.read() == [0, 59, 60, 130]
    # Another generation's roster on the same store starts empty.
    assert recovery._SurvivorRoster(store, 8, world_size=131).read() == []


def _roster_rank_main(rank, world, port, survivors, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0)
    roster = recovery._SurvivorRoster(store, 1, world)
    if rank in survivors:
        roster.announce(rank)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    try:
        model = torch.nn.Linear(4, 2)
        with torch.no_grad():
            for p in model.parameters():
                p.fill_(float(rank + 1))
        state = {"model": model, "step": 100 + rank}
        replaced = recovery._sync_state(dist, torch, state, rank in survivors,
                                        recovery._default_state_dict,
                                        recovery._default_load_state_dict, roster.read())
        out.put((rank, replaced, float(model.weight[0, 0]), state["step"]))
    finally:
        dist.destroy_process_group()


def test_syncState_RosterFromTheStore_SameHandoverWithoutTheAllGather():
    results = _run(3, {0, 2}, target=_roster_rank_main)
    assert results == {0: ([1], 1.0, 100), 1: ([1], 1.0, 100), 2: ([1], 3.0, 102)}, results
