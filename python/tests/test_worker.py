"""ddp_coordinator.worker: the worker's environment, its lease and its heartbeat file."""
import json
import os
import sys
import time

import pytest

from ddp_coordinator import worker


def test_info_ReadsTorchrunAndDdpVariables():
    env = {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4",
           "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "ROLE_NAME": "trainer",
           "ROLE_RANK": "3", "ROLE_WORLD_SIZE": "6", "TORCHELASTIC_RESTART_COUNT": "2",
           "TORCHELASTIC_MAX_RESTARTS": "3", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500",
           "DDP_JOB": "j1", "DDP_GENERATION": "4", "DDP_COORDINATOR": "c:29400"}
    me = worker.info(env)
    assert (me.job_id, me.generation, me.rank, me.local_rank, me.world_size) == (
        "j1", 4, 5, 1, 8)
    assert (me.local_world_size, me.group_rank, me.group_world_size) == (4, 1, 2)
    assert (me.role, me.role_rank, me.role_world_size) == ("trainer", 3, 6)
    assert (me.restart_count, me.max_restarts) == (2, 3)
    assert (me.master_addr, me.master_port, me.coordinator) == ("10.0.0.1", 29500, "c:29400")
    assert not me.is_main_process


def test_info_UnderTorchrun_TakesRunIdAndSingleProcessDefaults():
    me = worker.info({"TORCHELASTIC_RUN_ID": "tr", "RANK": "0", "WORLD_SIZE": "2"})
    assert (me.job_id, me.generation, me.role_rank, me.role_world_size) == ("tr", 0, 0, 2)
    assert me.is_main_process
    assert worker.info({}).world_size == 1


def test_info_NotAnInteger_RaisesNamingTheVariable():
    with pytest.raises(ValueError, match="RANK='x'"):
        worker.info({"RANK": "x"})


def write_lease(path, **lease):
    path.write_text(json.dumps(lease))
    return str(path)


def test_generationIsCurrent_NoLeaseFile_IsTrue():
    assert worker.generation_is_current(environ={})


def test_generationIsCurrent_CurrentLeaseOfThisGeneration_IsTrue(tmp_path):
    lease = write_lease(tmp_path / "lease", generation=3, current=True,
                        valid_until_monotonic=time.monotonic() + 60)
    assert worker.generation_is_current(environ={"DDP_LEASE_FILE": lease, "DDP_GENERATION": "3"})


def test_generationIsCurrent_NoDeadline_IsTrue(tmp_path):
    lease = write_lease(tmp_path / "lease", generation=3, current=True,
                        valid_until_monotonic=None)
    assert worker.generation_is_current(environ={"DDP_LEASE_FILE": lease, "DDP_GENERATION": "3"})


@pytest.mark.parametrize("lease, generation", [
    ({"generation": 4, "current": True, "valid_until_monotonic": None}, "3"),
    ({"generation": 3, "current": False, "valid_until_monotonic": None}, "3"),
    ({"generation": 3, "current": True, "valid_until_monotonic": 0.0}, "3"),
])
def test_generationIsCurrent_OtherGenerationStoppedOrExpired_IsFalse(tmp_path, lease, generation):
    path = write_lease(tmp_path / "lease", **lease)
    assert not worker.generation_is_current(
        environ={"DDP_LEASE_FILE": path, "DDP_GENERATION": generation})


def test_generationIsCurrent_LeaseEndsWithinMargin_IsFalse(tmp_path):
    lease = write_lease(tmp_path / "lease", generation=1, current=True,
                        valid_until_monotonic=time.monotonic() + 0.2)
    env = {"DDP_LEASE_FILE": lease, "DDP_GENERATION": "1"}
    assert not worker.generation_is_current(margin_s=1.0, environ=env)
    assert worker.generation_is_current(margin_s=0.0, environ=env)


@pytest.mark.parametrize("content", ["", "{not json", "[1, 2]"])
def test_generationIsCurrent_UnreadableOrMalformedFile_IsFalse(tmp_path, content):
    path = tmp_path / "lease"
    path.write_text(content)
    assert not worker.generation_is_current(
        environ={"DDP_LEASE_FILE": str(path), "DDP_GENERATION": "1"})
    assert not worker.generation_is_current(
        environ={"DDP_LEASE_FILE": str(tmp_path / "missing"), "DDP_GENERATION": "1"})


def test_heartbeat_TouchesTheFile(tmp_path):
    path = tmp_path / "heartbeat"
    assert worker.heartbeat({"DDP_HEARTBEAT_FILE": str(path)})
    assert path.exists()
    os.utime(path, (1, 1))
    assert worker.heartbeat({"DDP_HEARTBEAT_FILE": str(path)})
    assert path.stat().st_mtime > time.time() - 60


def test_heartbeat_NoFile_ReturnsFalse():
    assert not worker.heartbeat({})


def test_reportProgress_WritesTheReportAndHeartbeats(tmp_path):
    env = {"DDP_PROGRESS_FILE": str(tmp_path / "progress.json"),
           "DDP_HEARTBEAT_FILE": str(tmp_path / "heartbeat")}
    assert worker.report_progress(120, env, loss=0.25, samples_per_s=5120, diverged=float("nan"))
    report = json.loads((tmp_path / "progress.json").read_text())
    assert report == {"step": 120, "metrics": {"loss": 0.25, "samples_per_s": 5120.0,
                                               "diverged": "NaN"}}
    assert (tmp_path / "heartbeat").exists(), "a report is a heartbeat too"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("step,metrics", [(-1, {}), (1.5, {}), (True, {}), (1, {"loss": "low"})])
def test_reportProgress_BadValues_RaiseValueError(tmp_path, step, metrics):
    with pytest.raises(ValueError):
        worker.report_progress(step, {"DDP_PROGRESS_FILE": str(tmp_path / "p")}, **metrics)


def test_reportCheckpoint_KeptInTheReportsThatFollow(tmp_path):
    env = {"DDP_PROGRESS_FILE": str(tmp_path / "progress.json")}
    before = int(time.time() * 1000)
    assert worker.report_progress(7, env, loss=0.5)
    assert worker.report_checkpoint(environ=env)  # the last step reported
    report = json.loads((tmp_path / "progress.json").read_text())
    assert report["step"] == 7 and report["checkpoint_step"] == 7, report
    assert before <= report["checkpoint_unix_ms"] <= int(time.time() * 1000) + 1, report
    assert worker.report_progress(9, env, loss=0.4)
    later = json.loads((tmp_path / "progress.json").read_text())
    assert later["step"] == 9 and later["checkpoint_step"] == 7, later
    assert later["checkpoint_unix_ms"] == report["checkpoint_unix_ms"], later
    assert worker.report_checkpoint(8, environ=env)
    assert json.loads((tmp_path / "progress.json").read_text())["checkpoint_step"] == 8


def test_reportCheckpoint_NoProgressYet_WritesStepZeroReport(tmp_path):
    env = {"DDP_PROGRESS_FILE": str(tmp_path / "progress.json")}
    assert worker.report_checkpoint(environ=env)
    report = json.loads((tmp_path / "progress.json").read_text())
    assert report["step"] == 0 and report["checkpoint_step"] == 0, report


@pytest.mark.parametrize("step", [-1, 1.5, True, "10"])
def test_reportCheckpoint_BadStep_RaisesValueError(step):
    with pytest.raises(ValueError, match="checkpoint step"):
        worker.report_checkpoint(step, {"DDP_PROGRESS_FILE": "/nonexistent/p"})


def test_reportCheckpoint_NoAgent_ReturnsFalse():
    assert not worker.report_checkpoint(3, {})


def test_reportProgress_NoAgent_ReturnsFalse():
    assert not worker.report_progress(3, {}, loss=1.0)


def test_kv_OutsideAJob_RaisesValueError():
    with pytest.raises(ValueError, match="DDP_JOB"):
        worker.kv({})


def test_importWorker_LoadsNeitherGrpcNorProtobuf():
    import subprocess
    code = ("import sys; from ddp_coordinator import worker; worker.info(); "
            "print(any(m == 'grpc' or m.startswith('google.protobuf') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.strip() == "False"


def test_preemption_NoFilesUnderTorchrun_FalseNone():
    assert worker.preemption_pending({}) is False
    assert worker.preemption_notice({}) is None
    assert worker.ready_to_leave({}) is False


def test_preemption_NoticeFile_PendingAndParsed(tmp_path):
    notice = tmp_path / "preemption_notice.json"
    ready = tmp_path / "ready_to_leave"
    env = {"DDP_PREEMPTION_NOTICE_FILE": str(notice), "DDP_PREEMPTION_READY_FILE": str(ready),
           "DDP_GENERATION": "3"}
    assert not worker.preemption_pending(env)
    assert worker.preemption_notice(env) is None
    notice.write_text(json.dumps({"node_id": "n2", "leave_at_unix_ms": 1700000000500,
                                  "reason": "spot", "generation": 3}))
    assert worker.preemption_pending(env)
    got = worker.preemption_notice(env)
    assert (got.node_id, got.leave_at, got.reason, got.generation) == (
        "n2", 1700000000.5, "spot", 3)
    assert not ready.exists()
    assert worker.ready_to_leave(env) is True
    assert ready.exists()


def test_preemption_TopLevelNames():
    import ddp_coordinator
    assert ddp_coordinator.preemption_pending is worker.preemption_pending
    assert "ready_to_leave" in ddp_coordinator.__all__
