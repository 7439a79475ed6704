"""ddp_coordinator.store.CoordinatorStore against a real coordinator: every c10d Store
method (from Python and through c10d's C++ PrefixStore), the job and generation scoping,
timeouts, a coordinator restart, tokens, the ddp:// scheme, and init_process_group of two
gloo ranks in their own processes."""
import datetime
import json
import os
import subprocess
import sys
import threading
import time

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import ddp_coordinator as ddpc  # noqa: E402
from conftest import ADMIN_TOKEN  # noqa: E402
from ddp_coordinator.store import CoordinatorStore, StoreTimeoutError, store_from_url  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def store(coordinator):
    s = CoordinatorStore(coordinator.address, job="job-a", generation=1, timeout=5)
    yield s
    s.close()


def set_later(store, key, value, delay=0.3):
    timer = threading.Timer(delay, store.set, (key, value))
    timer.start()
    return timer


def test_SetGet_StrAndBytes_RoundTripAsBytes(store):
    store.set("text", "value")
    store.set(b"raw", b"\x00\xffbytes")
    assert store.get("text") == b"value"
    assert store.get("raw") == b"\x00\xffbytes"
    store.set("text", "again")
    assert store.get("text") == b"again"


def test_Get_MissingKey_WaitsUntilSet(store):
    timer = set_later(store, "late", "here")
    start = time.monotonic()
    assert store.get("late") == b"here"
    assert time.monotonic() - start >= 0.2
    timer.join()


def test_Get_NeverSet_RaisesStoreTimeoutErrorAfterTheTimeout(store):
    store.set_timeout(datetime.timedelta(seconds=0.5))
    start = time.monotonic()
    with pytest.raises(StoreTimeoutError) as caught:
        store.get("never")
    assert 0.4 <= time.monotonic() - start < 5
    assert isinstance(caught.value, RuntimeError)
    assert isinstance(caught.value, ddpc.DeadlineExceededError)
    assert "'never'" in str(caught.value) and "generation 1" in str(caught.value)


def test_Add_MissingKeyStartsAtZero_Accumulates(store):
    assert store.add("counter", 5) == 5
    assert store.add("counter", -2) == 3
    assert store.get("counter") == b"3"
    store.set("word", "abc")
    with pytest.raises(ddpc.InvalidArgumentError):
        store.add("word", 1)


def test_AddZero_ReadsWithoutAWrite_MissingKeyCreated(store, coordinator):
    store.add("counter", 4)
    kv = ddpc.Client(coordinator.address).kv("job-a")
    revision = kv.status().revision
    assert store.add("counter", 0) == 4  # c10d's barrier polls like this
    assert kv.status().revision == revision
    assert store.add("fresh", 0) == 0 and store.check(["fresh"])  # as TCPStore: created
    for not_a_counter in ("abc", "4_000"):  # Python's int() would take the second
        store.set("word", not_a_counter)
        with pytest.raises(ddpc.InvalidArgumentError):
            store.add("word", 0)


def test_CompareSet_FollowsTcpStoreSemantics(store):
    assert store.compare_set("k", "", "first") == b"first"          # missing, expected ''
    assert store.compare_set("k", "other", "x") == b"first"         # mismatch: current
    assert store.compare_set("k", "first", "second") == b"second"   # match: swapped
    assert store.get("k") == b"second"
    assert store.compare_set("absent", "hoped", "x") == b"hoped"    # TCPStore's answer
    assert not store.check(["absent"])


def test_Wait_KeysSetLater_ReturnsOnceAllExist(store):
    store.set("w1", "1")
    timer = set_later(store, "w2", "2")
    start = time.monotonic()
    store.wait(["w1", "w2"], datetime.timedelta(seconds=5))
    assert 0.2 <= time.monotonic() - start < 4
    timer.join()


def test_Wait_Timeout_RaisesAfterTheGivenTimeout(store):
    start = time.monotonic()
    with pytest.raises(StoreTimeoutError):
        store.wait(["missing"], datetime.timedelta(seconds=0.3))
    assert 0.25 <= time.monotonic() - start < 4
    with pytest.raises(StoreTimeoutError):  # the store's timeout when none is given
        store.set_timeout(datetime.timedelta(seconds=0.2))
        store.wait(["missing"])


def test_Wait_MoreKeysThanOneWaitCallTakes_WaitsForAll(store):
    keys = [f"many/{i}" for i in range(1030)]  # the coordinator takes 1,024 per call
    for key in keys[:-1]:
        store.set(key, "")
    timer = set_later(store, keys[-1], "last", delay=0.2)
    store.wait(keys, datetime.timedelta(seconds=20))
    assert store.num_keys() == 1030
    timer.join()


def test_Check_OnlyWhenEveryKeyExists(store):
    store.set("c1", "x")
    assert store.check(["c1"])
    assert not store.check(["c1", "c2"])
    store.set("c2", "")  # an empty value is a set key
    assert store.check(["c1", "c2"])


def test_DeleteKeyAndNumKeys_CountOnlyThisStoresKeys(store, coordinator):
    store.set("a", "1")
    store.add("b", 1)
    client = ddpc.Client(coordinator.address)
    client.kv("job-a").put("outside/the/store", "x")  # same namespace, other prefix
    assert store.num_keys() == 2
    assert store.delete_key("a") is True
    assert store.delete_key("a") is False
    assert store.num_keys() == 1
    client.close()


def test_PrefixStore_CppCallsReachEveryMethod(store):
    # c10d's C++ side calls the trampoline by the C++ names (getNumKeys, deleteKey).
    prefixed = dist.PrefixStore("pg", store)
    prefixed.set("k", b"v")
    assert prefixed.get("k") == b"v"
    assert prefixed.add("n", 2) == 2
    assert prefixed.compare_set("k", "v", "w") == b"w"
    prefixed.wait(["k"])
    prefixed.wait(["n"], datetime.timedelta(seconds=1))
    assert prefixed.num_keys() == 2
    assert prefixed.delete_key("k") is True
    assert store.get("pg/n") == b"2"


def test_Generations_SeeNothingOfEachOther_OldOnesDeleted(coordinator):
    old = CoordinatorStore(coordinator.address, job="job-g", generation=1, timeout=1)
    old.set("rank0/addr", "old")
    old.add("count", 2)
    new = CoordinatorStore(coordinator.address, job="job-g", generation=2, timeout=1)
    later = CoordinatorStore(coordinator.address, job="job-g", generation=10, timeout=1)
    later.set("x", "1")
    assert not new.check(["rank0/addr"])
    assert new.add("count", 1) == 1
    assert new.num_keys() == 1
    assert new.delete_previous_generations() == 2
    assert old.num_keys() == 0
    assert new.num_keys() == 1 and later.num_keys() == 1  # this and later ones stay
    other_job = CoordinatorStore(coordinator.address, job="job-h", generation=2, timeout=1)
    assert not other_job.check(["count"])


def test_Runs_ANewRunOfTheJobIdSeesNothingOfTheLast_ItsKeysDeleted(coordinator):
    client = ddpc.Client(coordinator.address)
    first = client.jobs.create("job-runs")
    store = CoordinatorStore(coordinator.address, job="job-runs", generation=1)
    assert store.run_id == first.created_unix_ms > 0
    store.set("default_pg/rank0", "old address")
    client.jobs.cancel("job-runs")
    client.jobs.delete("job-runs")  # even a deleted and re-created job id
    time.sleep(0.01)  # a later creation time
    client.jobs.create("job-runs")
    again = CoordinatorStore(coordinator.address, job="job-runs", generation=1)  # gen 1 again
    assert again.run_id > store.run_id
    assert not again.check(["default_pg/rank0"])
    again.set("mine", "1")
    assert again.delete_previous_generations() == 1
    assert store.num_keys() == 0 and again.num_keys() == 1
    client.close()


def test_DeletePreviousGenerations_OddKeys_EachDeletedOrSteppedOverOnce(coordinator):
    store = CoordinatorStore(coordinator.address, job="job-odd", generation=2, run_id=5)
    kv = ddpc.Client(coordinator.address).kv("job-odd")
    for key in ("c10d/r007/g1/x",      # another run, spelled with zeros
                "c10d/r5/g01/x",       # an earlier generation of this run, the same
                "c10d/r5/g2x/x",       # not a generation: stays
                "c10d/rabc", "c10d/r5", "c10d/r5/"):  # not of the layout: stay
        kv.put(key, "v")
    store.set("mine", "1")
    assert store.delete_previous_generations() == 2
    assert sorted(k.key for k in kv.items("c10d/")) == [
        b"c10d/r5", b"c10d/r5/", b"c10d/r5/g2/mine", b"c10d/r5/g2x/x", b"c10d/rabc"]


def test_Constructor_NoJobOrGeneration_ValueErrorNamingTheFix(coordinator):
    with pytest.raises(ValueError, match="DDP_JOB"):
        CoordinatorStore(coordinator.address, generation=1, environ={})
    with pytest.raises(ValueError, match="DDP_GENERATION"):
        CoordinatorStore(coordinator.address, job="j", environ={})
    with pytest.raises(ValueError, match="'two'"):
        CoordinatorStore(coordinator.address, job="j", generation="two")
    with pytest.raises(ValueError, match="run_id -1 is negative"):
        CoordinatorStore(coordinator.address, job="j", generation=1, run_id=-1)
    env = {"DDP_JOB": "env-job", "DDP_GENERATION": "4", "DDP_COORDINATOR": coordinator.address}
    s = CoordinatorStore(environ=env)
    assert (s.job, s.generation, s.key_prefix) == ("env-job", 4, b"c10d/r0/g4/")


def test_CoordinatorRestart_KeysSurviveAndCallsGoOn(coordinator):
    store = CoordinatorStore(coordinator.address, job="job-r", generation=1, timeout=10)
    store.set("before", "1")
    coordinator.restart()
    assert store.get("before") == b"1"
    assert store.add("after", 1) == 1
    store.close()


def test_CoordinatorRestart_DuringAWait_TheWaitGoesOnAndReturns(coordinator):
    waiter = CoordinatorStore(coordinator.address, job="job-w", generation=1, timeout=60)
    outcome = []

    def wait():
        try:
            waiter.wait(["after-restart"])
            outcome.append("returned")
        except Exception as error:  # reported by the assertion below
            outcome.append(error)

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.3)  # the Wait call is on the coordinator now
    coordinator.restart()
    CoordinatorStore(coordinator.address, job="job-w", generation=1).set("after-restart", "1")
    thread.join(30)
    assert outcome == ["returned"]


def test_Token_WrongOneRefused_AdminWorks(secure_coordinator):
    with pytest.raises(ddpc.UnauthenticatedError):
        CoordinatorStore(secure_coordinator.address, job="j", generation=1,
                         token="wrong").set("k", "v")
    store = CoordinatorStore(secure_coordinator.address, job="j", generation=1,
                             token=ADMIN_TOKEN)
    store.set("k", "v")
    assert store.get("k") == b"v"


def test_JobToken_ItsOwnJobOnly(secure_coordinator):
    with ddpc.Client(secure_coordinator.address, token=ADMIN_TOKEN) as admin:
        token = admin.jobs.create("tok-job").token
    store = CoordinatorStore(secure_coordinator.address, job="tok-job", generation=1,
                             token=token)
    assert store.add("n", 1) == 1
    with pytest.raises(ddpc.PermissionDeniedError):
        CoordinatorStore(secure_coordinator.address, job="another-job", generation=1,
                         token=token).set("k", "v")


def test_EndpointList_DeadOneFirst_GoesToTheNext(coordinator):
    store = CoordinatorStore(f"127.0.0.1:1,{coordinator.address}", job="job-e", generation=1)
    store.set("k", "v")
    assert store.get("k") == b"v"


def test_StoreFromUrl_QueryAndEnvironment(coordinator, monkeypatch):
    monkeypatch.setenv("DDP_COORDINATOR", coordinator.address)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    store, rank, world_size = store_from_url("ddp://?job=url-job&generation=3&prefix=mine")
    assert (rank, world_size, store.job, store.generation) == (1, 2, "url-job", 3)
    assert store.key_prefix == b"mine/r0/g3/"
    store, rank, _ = store_from_url(f"ddp://{coordinator.address}/?job=u&generation=1&rank=0")
    assert rank == 0 and store.job == "u"
    with pytest.raises(ValueError, match="rank 5"):
        store_from_url("ddp://?job=u&generation=1&rank=5&world_size=2")
    with pytest.raises(ValueError, match="world_size='x'"):
        store_from_url("ddp://?job=u&generation=1&world_size=x")


def run_two_ranks(coordinator, tmp_path, init, job):
    env = dict(os.environ, DDP_COORDINATOR=coordinator.address, DDP_JOB=job,
               DDP_GENERATION="1", WORLD_SIZE="2", GLOO_SOCKET_IFNAME="lo",
               PYTHONPATH=os.path.dirname(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("MASTER_ADDR", None)
    env.pop("MASTER_PORT", None)  # no TCPStore to fall back on
    ranks = [subprocess.Popen([sys.executable, os.path.join(HERE, "store_train.py"),
                               "--init", init, "--result-dir", str(tmp_path)],
                              env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) for r in range(2)]
    outputs = [p.communicate(timeout=120)[0].decode() for p in ranks]
    assert [p.returncode for p in ranks] == [0, 0], outputs
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["world_size"] for r in results] == [2, 2]
    assert results[0]["checksum"] == results[1]["checksum"]


@pytest.mark.parametrize("init", ["url", "store"])
def test_InitProcessGroup_TwoGlooRanks_TrainInStep(coordinator, tmp_path, init):
    run_two_ranks(coordinator, tmp_path, init, job=f"pg-{init}")
    keys = [kv.key for kv in ddpc.Client(coordinator.address).kv(f"pg-{init}").items()]
    assert keys and all(k.startswith(b"c10d/r0/g1/") for k in keys), keys
