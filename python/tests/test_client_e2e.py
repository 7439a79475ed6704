"""ddp_coordinator.Client against a real coordinator: jobs, KV, leases, watches that
resume across a coordinator restart, errors with their gRPC codes, tokens."""
import threading
import time

import grpc
import pytest

import ddp_coordinator as ddpc
from conftest import ADMIN_TOKEN


@pytest.fixture
def client(coordinator):
    with ddpc.Client(coordinator.address, timeout=10) as c:
        yield c


def test_jobs_CreateGetListUpdateCancel(client):
    settings = ddpc.JobSettings(min_nodes=2, max_nodes=3, nproc_per_node=4, max_restarts=2,
                                hang_timeout_ms=45_000)
    job = client.jobs.create("py-job", settings)
    assert job.job_id == "py-job"
    assert job.state == ddpc.JobState.WAITING
    assert job.settings.min_nodes == 2 and job.settings.nproc_per_node == 4
    assert job.settings.hang_timeout_ms == 45_000
    assert client.jobs.create("py-default").settings.hang_timeout_ms == 10_000  # unset
    client.jobs.cancel("py-default")
    assert client.jobs.get("py-job").settings.max_restarts == 2
    assert [j.job_id for j in client.jobs.list(states=[ddpc.JobState.WAITING])] == ["py-job"]
    assert client.jobs.list(states=[ddpc.JobState.RUNNING]) == []
    assert client.jobs.update("py-job", max_nodes=4).settings.max_nodes == 4
    cancelled = client.jobs.cancel("py-job", reason="test over")
    assert cancelled.state == ddpc.JobState.CANCELLED and cancelled.finished
    assert client.jobs.wait("py-job", timeout=5).state == ddpc.JobState.CANCELLED


def test_jobs_PastRuns_ListedAfterTheCurrentRun(client):
    client.jobs.create("again")
    client.jobs.cancel("again")
    second = client.jobs.create("again")
    assert second.run == 2
    past = client.jobs.past_runs("again")
    assert [(j.run, j.state) for j in past] == [(1, ddpc.JobState.CANCELLED)]
    assert client.jobs.get("again", run=1).state == ddpc.JobState.CANCELLED


def test_jobs_Errors_CarryTheGrpcCodeAndMessage(client):
    with pytest.raises(ddpc.NotFoundError) as caught:
        client.jobs.get("no-such-job")
    assert caught.value.code == grpc.StatusCode.NOT_FOUND
    assert "no-such-job" in caught.value.message
    with pytest.raises(ddpc.InvalidArgumentError):
        client.jobs.create("bad id with spaces")
    client.jobs.create("sized", ddpc.JobSettings(min_nodes=1))
    with pytest.raises(ddpc.AlreadyExistsError):
        client.jobs.create("sized", ddpc.JobSettings(min_nodes=2))
    assert isinstance(ddpc.NotFoundError(grpc.StatusCode.NOT_FOUND, "x"), ddpc.CoordinatorError)


def test_jobs_Watch_DeliversEventsInOrderAndEndsWithTheJob(client):
    client.jobs.create("watched")
    client.jobs.update("watched", max_nodes=2)
    client.jobs.cancel("watched", reason="done")
    events = list(client.jobs.watch("watched", from_index=1))
    assert [e.index for e in events] == list(range(1, len(events) + 1))
    assert events[0].type == ddpc.JobEventType.JOB_CREATED
    assert events[-1].type == ddpc.JobEventType.JOB_FINISHED


def test_kv_PutGetRangeDelete(client):
    kv = client.kv("ns1")
    first = kv.put("a/1", "one")
    assert first.revision > 0 and first.previous is None
    second = kv.put(b"a/1", b"uno", return_previous=True)
    assert second.previous.value == b"one" and second.revision > first.revision
    kv.put("a/2", "two")
    kv.put("b/1", "other")
    got = kv.get("a/1")
    assert (got.namespace, got.key, got.value, got.version) == ("ns1", b"a/1", b"uno", 2)
    assert kv.get("missing") is None
    page = kv.range("a/", limit=1)
    assert [x.key for x in page.kvs] == [b"a/1"] and page.more
    assert [x.key for x in kv.items("a/", page_size=1)] == [b"a/1", b"a/2"]
    assert [x.value for x in kv.items(keys_only=True)] == [b"", b"", b""]
    assert kv.delete("a/", prefix=True) == 2
    assert [x.key for x in kv.items()] == [b"b/1"]
    assert client.kv("ns2").get("b/1") is None


def test_kv_Conditions_CompareAndSetAdd(client):
    kv = client.kv("cond")
    kv.put("k", "v", if_absent=True)
    with pytest.raises(ddpc.FailedPreconditionError):
        kv.put("k", "w", if_absent=True)
    revision = kv.get("k").mod_revision
    with pytest.raises(ddpc.FailedPreconditionError):
        kv.put("k", "w", expected_mod_revision=revision + 100)
    kv.put("k", "w", expected_mod_revision=revision)
    lost = kv.compare_and_set("k", "not-w", "x")
    assert (lost.swapped, lost.value) == (False, b"w")
    won = kv.compare_and_set("k", "w", "x")
    assert (won.swapped, won.value) == (True, b"x")
    assert kv.compare_and_set("fresh", "", "1").swapped
    assert kv.add("counter") == 1 and kv.add("counter", 41) == 42
    with pytest.raises(ddpc.InvalidArgumentError):
        kv.add("k")


def test_kv_Wait_ReturnsWhenEveryKeyExistsElseDeadline(client):
    kv = client.kv("wait")
    with pytest.raises(ddpc.DeadlineExceededError):
        kv.wait(["never"], timeout=0.2)
    threading.Timer(0.2, lambda: (kv.put("x", "1"), kv.put("y", "2"))).start()
    assert kv.wait(["x", "y"], timeout=10) > 0


def test_kv_Leases_KeysGoWithTheirLease(client):
    kv = client.kv("leases")
    lease = kv.grant_lease(ttl=30)
    assert lease.lease != 0 and lease.ttl_ms == 30000
    kv.put("held", "1", lease=lease)
    assert kv.get("held").lease == lease.lease
    assert kv.keep_alive(lease).ttl_ms == 30000
    assert kv.revoke_lease(lease) == 1
    assert kv.get("held") is None
    with pytest.raises(ddpc.NotFoundError):
        kv.keep_alive(lease.lease)


def test_kv_Watch_SeesPutsFromARevisionThenLiveDeletes(client):
    kv = client.kv("watch")
    start = kv.put("w/1", "a").revision
    kv.put("other", "c")
    kv.put("w/2", "b")
    watch = kv.watch("w/", start_revision=start)
    it = iter(watch)
    events = [next(it), next(it)]
    kv.delete("w/1")
    events.append(next(it))
    watch.close()
    assert [(e.type, e.kv.key, e.kv.value) for e in events] == [
        (ddpc.EventType.PUT, b"w/1", b"a"), (ddpc.EventType.PUT, b"w/2", b"b"),
        (ddpc.EventType.DELETE, b"w/1", b"")]


def test_kv_Watch_ResumesAfterACoordinatorRestart(coordinator):
    client = ddpc.Client(coordinator.address, timeout=5)
    kv = client.kv("resume")
    start = kv.put("k", "before").revision
    watch = kv.watch("", start_revision=start, reconnect_delay=0.05)
    seen = []
    it = iter(watch)
    seen.append(next(it).kv.value)
    coordinator.restart()
    kv.put("k", "after")
    seen.append(next(it).kv.value)
    watch.close()
    client.close()
    assert seen == [b"before", b"after"]  # nothing twice, nothing lost


def test_jobs_Watch_ResumesAfterACoordinatorRestart(coordinator):
    client = ddpc.Client(coordinator.address, timeout=5)
    client.jobs.create("resumed")
    watch = client.jobs.watch("resumed", from_index=1, reconnect_delay=0.05)
    it = iter(watch)
    first = next(it)
    coordinator.restart()
    client.jobs.cancel("resumed")
    rest = list(it)
    client.close()
    indexes = [first.index] + [e.index for e in rest]
    assert indexes == sorted(set(indexes))
    assert rest[-1].type == ddpc.JobEventType.JOB_FINISHED


def test_cluster_Status_SingleCoordinator(client, coordinator):
    status = client.cluster_status()
    assert status.role == ddpc.Role.SINGLE
    assert status.store.startswith("sqlite:")
    assert client.kv().status().revision >= 0


def test_endpoints_DeadEndpointFirst_GoesToTheNextOne(coordinator):
    with ddpc.Client(f"127.0.0.1:1,{coordinator.address}", timeout=2) as client:
        assert client.cluster_status().role == ddpc.Role.SINGLE
        client.kv("e").put("k", "v")


def test_endpoints_NoneAnswers_RaisesUnavailable():
    with ddpc.Client("127.0.0.1:1", timeout=1, retry_rounds=1) as client:
        with pytest.raises(ddpc.UnavailableError) as caught:
            client.kv().get("k")
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE


def test_environment_DdpCoordinatorAndToken(secure_coordinator, monkeypatch):
    monkeypatch.setenv("DDP_COORDINATOR", secure_coordinator.address)
    with ddpc.Client(token="") as anonymous:
        with pytest.raises((ddpc.UnauthenticatedError, ddpc.PermissionDeniedError)):
            anonymous.jobs.list()
    monkeypatch.setenv("DDP_TOKEN", ADMIN_TOKEN)
    with ddpc.Client() as admin:
        job = admin.jobs.create("tokened")
        assert job.token
        reissued = admin.jobs.issue_token("tokened")
        assert reissued.token and reissued.token != job.token
    # A job's token: its own namespace only.
    monkeypatch.setenv("DDP_TOKEN", reissued.token)
    with ddpc.Client() as worker_client:
        worker_client.kv("tokened").put("k", "v")
        with pytest.raises(ddpc.PermissionDeniedError):
            worker_client.kv("someone-else").put("k", "v")


def test_workerKv_UsesTheJobNamespaceAndToken(secure_coordinator, monkeypatch):
    with ddpc.Client(secure_coordinator.address, token=ADMIN_TOKEN) as admin:
        token = admin.jobs.create("wjob").token
        kv = ddpc.worker.kv({"DDP_JOB": "wjob", "DDP_COORDINATOR": secure_coordinator.address,
                             "DDP_TOKEN": token})
        kv.put("from-worker", "1")
        assert admin.kv("wjob").get("from-worker").value == b"1"
