"""ddp_coordinator.recovery's helpers without torch: the wait for the generation's store, the
event-driven barrier of init_process_group and the step trace (the end-to-end behaviour is in
test_inproc_e2e.py)."""
import re
import socket
import threading
import time

import pytest

from ddp_coordinator import recovery


def unused_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_awaitStore_RankZero_ReturnsAtOnceWithoutConnecting(monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(unused_port()))  # nothing listens there
    started = time.monotonic()
    assert recovery._await_store(5.0)
    assert time.monotonic() - started < 1.0


def test_awaitStore_NothingListens_FalseAfterTimeout(monkeypatch):
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(unused_port()))
    started = time.monotonic()
    assert not recovery._await_store(0.2)
    assert time.monotonic() - started >= 0.2


def test_awaitStore_AbandonedWhileWaiting_RaisesRuntimeError(monkeypatch):
    """A peer failed before the group formed: the wait ends (RuntimeError, which run() takes
    for the abandoned generation's error and parks), not at its timeout."""
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(unused_port()))
    abandoned = threading.Event()
    threading.Timer(0.2, abandoned.set).start()
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="abandoned while waiting for the store"):
        recovery._await_store(30.0, abandoned)
    assert time.monotonic() - started < 5.0


def test_awaitStore_StoreListensLater_ReturnsSoonAfter(monkeypatch):
    """The point of the wait: connected within polls of the store's bind, not after the
    second torch's refused TCPStore client sleeps."""
    port = unused_port()
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    bound = []

    def bind_later():
        time.sleep(0.3)
        listener.bind(("127.0.0.1", port))
        listener.listen(4)
        bound.append(time.monotonic())

    thread = threading.Thread(target=bind_later)
    thread.start()
    try:
        assert recovery._await_store(10.0)
        returned = time.monotonic()
    finally:
        thread.join()
        listener.close()
    assert bound and returned >= bound[0]
    assert returned - bound[0] < 0.5, returned - bound[0]


def test_trace_On_PrintsWallClockRankAndStep(monkeypatch, capsys):
    monkeypatch.setenv("DDP_RECOVERY_TRACE", "1")
    monkeypatch.setenv("RANK", "3")
    before = time.time()
    recovery._trace("join 4 received")
    line = capsys.readouterr().err.strip()
    match = re.fullmatch(r"ddp_coordinator\.recovery: trace (\d+\.\d+) rank 3 join 4 received",
                         line)
    assert match, line
    assert before - 0.001 <= float(match.group(1)) <= time.time() + 0.001


@pytest.mark.parametrize("value", [None, "", "0"])
def test_trace_Off_PrintsNothing(monkeypatch, capsys, value):
    if value is None:
        monkeypatch.delenv("DDP_RECOVERY_TRACE", raising=False)
    else:
        monkeypatch.setenv("DDP_RECOVERY_TRACE", value)
    recovery._trace("join 4 received")
    assert capsys.readouterr().err == ""


class _FakeStore:
    """The part of a c10d Store the barrier uses: add, set, wait (blocking, with a timeout)."""

    def __init__(self):
        self._values = {}
        self._changed = threading.Condition()

    def add(self, key, amount):
        with self._changed:
            self._values[key] = self._values.get(key, 0) + amount
            self._changed.notify_all()
            return self._values[key]

    def set(self, key, value):
        with self._changed:
            self._values[key] = value
            self._changed.notify_all()

    def wait(self, keys, timeout):
        with self._changed:
            if not self._changed.wait_for(lambda: all(k in self._values for k in keys),
                                          timeout.total_seconds()):
                raise RuntimeError(f"wait timed out for {keys}")


class _FakeC10d:
    STORE_BASED_BARRIER_PREFIX = "store_based_barrier_key"
    _group_count = 1

    def __init__(self, world_size, barrier):
        self._world_size = world_size
        self._store_based_barrier = barrier

    def get_world_size(self):
        return self._world_size


class _FakeDist:
    def __init__(self, c10d):
        self.distributed_c10d = c10d


def _polling_barrier(rank, store, timeout):  # torch 1.13's signature
    raise AssertionError("the polling barrier ran")


def test_eventDrivenBarrier_Torch113_LastRankReleasesTheOthersWithoutPolling():
    import datetime
    c10d = _FakeC10d(3, _polling_barrier)
    store = _FakeStore()
    passed = []
    with recovery._event_driven_barrier(_FakeDist(c10d)):
        assert c10d._store_based_barrier is not _polling_barrier
        threads = [threading.Thread(target=lambda r=r: (c10d._store_based_barrier(
            r, store, datetime.timedelta(seconds=10)), passed.append(r))) for r in range(2)]
        for thread in threads:
            thread.start()
        time.sleep(0.2)
        assert passed == []  # two of three arrived: both wait
        c10d._store_based_barrier(2, store, datetime.timedelta(seconds=10))
        for thread in threads:
            thread.join(5.0)
        assert sorted(passed) == [0, 1]
    assert c10d._store_based_barrier is _polling_barrier  # restored


def test_eventDrivenBarrier_RankMissing_TimesOutAsTorchWould():
    import datetime
    c10d = _FakeC10d(2, _polling_barrier)
    with recovery._event_driven_barrier(_FakeDist(c10d)):
        with pytest.raises(RuntimeError, match="timed out"):
            c10d._store_based_barrier(0, _FakeStore(), datetime.timedelta(seconds=0.2))


def test_eventDrivenBarrier_OtherSignature_LeftAlone():
    def newer_barrier(rank, store, group_name, rendezvous_count, timeout, logging_interval):
        pass
    c10d = _FakeC10d(2, newer_barrier)
    with recovery._event_driven_barrier(_FakeDist(c10d)):
        assert c10d._store_based_barrier is newer_barrier
    assert c10d._store_based_barrier is newer_barrier
