"""report_progress end to end: a real ddp-client runs two workers that report their step;
the coordinator shows each rank's step, rate and metrics (gRPC client, ddpctl jobs get);
a rank that stops reporting is found hung by the worker heartbeat timeout, with no
heartbeat file in the script; a checkpoint reported with report_checkpoint makes the work
after it lost at a failure (the job's time); stragglers are flagged from the step times
the workers report, and in an unmodified gloo script that reports nothing, from the CPU
busy share the agent measures."""
import os
import subprocess
import time

from conftest import bazel_binary

import ddp_coordinator as ddpc

HERE = os.path.dirname(os.path.abspath(__file__))


def start_agent(coordinator, tmp_path, job, *flags, script_args=(), nproc=2,
                script="progress_train.py"):
    env = dict(os.environ, PYTHON_EXEC="/usr/bin/python3",
               PYTHONPATH=os.path.dirname(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = open(tmp_path / f"{job}.log", "w")
    return subprocess.Popen(
        [bazel_binary("client/agent", "ddp-client"), "--coordinator", coordinator.address,
         "--job", job, "--node-id", "n", "--local-addr", "127.0.0.1",
         "--log-dir", str(tmp_path / "logs"), "--nnodes", "1", "--nproc-per-node", str(nproc),
         "--shutdown-timeout", "3", *flags,
         os.path.join(HERE, "scripts", script), *script_args],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for(condition, timeout_s=60):
    """condition()'s first true value within the timeout (None otherwise); a job that does
    not exist yet (the agent has not registered) counts as false."""
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


def test_reportProgress_ShownPerRankByTheCoordinatorAndDdpctl(coordinator, tmp_path):
    stop = tmp_path / "stop"
    agent = start_agent(coordinator, tmp_path, "progress", script_args=["--stop", str(stop)])
    try:
        with ddpc.Client(coordinator.address) as client:
            def progressed():
                job = client.jobs.get("progress")
                reports = [p for m in job.members for p in m.progress]
                # A rate needs two reads of a rank's file (every 5 s): the first read may
                # come before the file exists, or after step 20.
                return reports if len(reports) == 2 and min(p.step for p in reports) >= 20 \
                    and min(p.steps_per_second for p in reports) > 0 else None
            reports = wait_for(progressed)
            assert reports, (tmp_path / "progress.log").read_text()
        assert sorted(p.global_rank for p in reports) == [0, 1]
        assert all(p.generation == 1 for p in reports)
        assert all(0 < p.steps_per_second < 20 for p in reports), reports
        assert all(set(p.metrics) == {"loss", "rank"} for p in reports), reports
        assert all(p.age_ms < 15000 for p in reports), reports
        shown = subprocess.run([bazel_binary("tools/ddpctl", "ddpctl"), "--coordinator",
                                coordinator.address, "jobs", "get", "progress"],
                               capture_output=True, text=True, timeout=30)
        assert "progress (as the workers reported it" in shown.stdout, shown.stdout
        assert "loss=" in shown.stdout and "n/1" in shown.stdout, shown.stdout
    finally:
        stop.write_text("")
        assert agent.wait(60) == 0, (tmp_path / "progress.log").read_text()


def test_reportProgress_RankStopsReporting_FoundHung(coordinator, tmp_path):
    stop = tmp_path / "stop"
    agent = start_agent(coordinator, tmp_path, "stall", "--worker-heartbeat-timeout", "2",
                        "--max-restarts", "1",
                        script_args=["--stop", str(stop), "--stall-at", "15"])
    try:
        with ddpc.Client(coordinator.address) as client:
            restarted = wait_for(lambda: client.jobs.get("stall").restart_count >= 1, 90)
            assert restarted, (tmp_path / "stall.log").read_text()
            job = client.jobs.get("stall")
        hangs = [f for f in job.failures if f.hang]
        assert hangs and hangs[0].global_rank == 1, job.failures
    finally:
        stop.write_text("")
        agent.wait(60)


def reports_of(client, job):
    return [p for m in client.jobs.get(job).members for p in m.progress]


def test_stragglers_OneRankHalfAgainSlower_FlaggedWithin20Steps(coordinator, tmp_path):
    stop = tmp_path / "stop"
    agent = start_agent(coordinator, tmp_path, "straggle", "--progress-interval", "1",
                        script_args=["--stop", str(stop), "--step-s", "0.2", "--slow-rank", "2"],
                        nproc=4)
    try:
        with ddpc.Client(coordinator.address) as client:
            flagged = wait_for(lambda: [p for p in reports_of(client, "straggle") if p.straggler],
                               90)
            assert flagged, (tmp_path / "straggle.log").read_text()
            assert [p.global_rank for p in flagged] == [2], flagged
            # Flagged within 20 of its steps (it reports a step as it begins it).
            assert flagged[0].step <= 20, flagged
            assert 0.5 < flagged[0].relative_speed < 0.8, flagged
            others = [p for p in reports_of(client, "straggle") if p.global_rank != 2]
            assert all(not p.straggler and p.relative_speed > 0.9 for p in others), others
    finally:
        stop.write_text("")
        agent.wait(60)


def test_stragglers_EvenRun_NobodyFlagged(coordinator, tmp_path):
    stop = tmp_path / "stop"
    agent = start_agent(coordinator, tmp_path, "even", "--progress-interval", "1",
                        script_args=["--stop", str(stop), "--step-s", "0.2"], nproc=4)
    try:
        with ddpc.Client(coordinator.address) as client:
            scored = wait_for(lambda: len([p for p in reports_of(client, "even")
                                           if p.relative_speed > 0]) == 4, 90)
            assert scored, (tmp_path / "even.log").read_text()
            deadline = time.time() + 8  # 40 steps
            while time.time() < deadline:
                flagged = [p for p in reports_of(client, "even") if p.straggler]
                assert not flagged, flagged
                time.sleep(0.3)
    finally:
        stop.write_text("")
        agent.wait(60)


def steps_done(path):
    try:
        return int(path.read_text() or 0)
    except FileNotFoundError:
        return 0


def start_cpu_steps(coordinator, tmp_path, job, *script_args):
    """4 ranks of an unmodified gloo script (no report_progress): 0.4 s of sleep and 30 ms
    of CPU per step, then an all_reduce; about a third of one core in all."""
    stop = tmp_path / "stop"
    steps = tmp_path / "steps"
    agent = start_agent(coordinator, tmp_path, job, script="cpu_steps_train.py", nproc=4,
                        script_args=["--stop", str(stop), "--steps-file", str(steps),
                                     *script_args])
    return agent, stop, steps


def test_stragglers_UnmodifiedScriptRankHalfAgainTheCpu_FlaggedFromCpuWithin20Steps(
        coordinator, tmp_path):
    agent, stop, steps = start_cpu_steps(coordinator, tmp_path, "cpu-straggle",
                                         "--slow-rank", "2")
    try:
        with ddpc.Client(coordinator.address) as client:
            flagged = wait_for(
                lambda: [p for p in reports_of(client, "cpu-straggle") if p.straggler], 90)
            at_step = steps_done(steps)
            assert flagged, (tmp_path / "cpu-straggle.log").read_text()
            print(f"flagged at step {at_step}: {flagged}")  # shown with pytest -s
            assert [p.global_rank for p in flagged] == [2], flagged
            assert flagged[0].speed_source == ddpc.SpeedSource.SPEED_SOURCE_CPU_BUSY, flagged
            # Bound: the agent's 5 s window past the import, a 1 s sample, a heartbeat.
            assert at_step <= 20, (at_step, flagged)
            assert 0.5 < flagged[0].relative_speed < 0.8, flagged
            def all_others():
                others = [p for p in reports_of(client, "cpu-straggle") if p.global_rank != 2]
                return others if len(others) == 3 else None

            # Under load a rank's first report can come after rank 2 was flagged.
            others = wait_for(all_others, 30)
            assert others, reports_of(client, "cpu-straggle")
            assert all(not p.straggler and p.cpu_busy > 0 for p in others), others
    finally:
        stop.write_text("")
        agent.wait(60)


def test_stragglers_UnmodifiedScriptEvenRun_NobodyFlaggedOver40Steps(coordinator, tmp_path):
    agent, stop, steps = start_cpu_steps(coordinator, tmp_path, "cpu-even")
    try:
        with ddpc.Client(coordinator.address) as client:
            scored = wait_for(lambda: len([p for p in reports_of(client, "cpu-even")
                                           if p.relative_speed > 0]) == 4, 90)
            assert scored, (tmp_path / "cpu-even.log").read_text()
            until = steps_done(steps) + 40
            deadline = time.time() + 90
            while steps_done(steps) < until and time.time() < deadline:
                ranks = reports_of(client, "cpu-even")
                assert not [p for p in ranks if p.straggler], ranks
                cpu = ddpc.SpeedSource.SPEED_SOURCE_CPU_BUSY
                assert all(p.speed_source == cpu for p in ranks if p.relative_speed > 0), ranks
                time.sleep(0.3)
            assert steps_done(steps) >= until, (tmp_path / "cpu-even.log").read_text()
            print(f"even run, step {steps_done(steps)}: {reports_of(client, 'cpu-even')}")
        shown = subprocess.run([bazel_binary("tools/ddpctl", "ddpctl"), "--coordinator",
                                coordinator.address, "jobs", "get", "cpu-even"],
                               capture_output=True, text=True, timeout=30)
        assert "cpu " in shown.stdout, shown.stdout
    finally:
        stop.write_text("")
        assert agent.wait(60) == 0, (tmp_path / "cpu-even.log").read_text()


def test_reportCheckpoint_FailureSecondsLater_WorkSinceItLost(coordinator, tmp_path):
    stop = tmp_path / "stop"
    fail_after = 3.0
    agent = start_agent(coordinator, tmp_path, "ckpt", "--progress-interval", "0.5",
                        "--max-restarts", "1", script="checkpoint_train.py",
                        script_args=["--stop", str(stop), "--fail-after", str(fail_after)])
    try:
        with ddpc.Client(coordinator.address) as client:
            def first_ended():
                job = client.jobs.get("ckpt")
                gens = job.time.generations if job.time else []
                return job if gens and gens[0].generation == 1 and gens[0].ended_by else None
            job = wait_for(first_ended, 90)
            assert job, (tmp_path / "ckpt.log").read_text()
        first = job.time.generations[0]
        assert first.ended_by == "worker_failure", job.time
        assert first.last_checkpoint_unix_ms > 0 and first.last_checkpoint_step == 10, first
        # The worker failed 3 s after its checkpoint (and its exit took a moment to be seen).
        assert fail_after - 0.5 <= first.work_lost_ms / 1000 <= fail_after + 2.5, first
        assert first.training_ms > first.work_lost_ms, first
        assert job.time.work_lost_ms == first.work_lost_ms, job.time
        shown = subprocess.run([bazel_binary("tools/ddpctl", "ddpctl"), "--coordinator",
                                coordinator.address, "jobs", "get", "ckpt"],
                               capture_output=True, text=True, timeout=30)
        assert "work since checkpoint" in shown.stdout and "step 10 at" in shown.stdout, \
            shown.stdout
    finally:
        stop.write_text("")
        agent.wait(60)
