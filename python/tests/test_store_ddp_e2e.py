"""Real gloo DDP training under two ddp-client agents and a coordinator with authorization
on, whose process group meets through ddp_coordinator.store (init_method="ddp://", no
TCPStore) with the job's token the agents hand their workers: a worker fails in the first
generation, the group restarts, and the second generation finishes with the same parameters
on every rank, having seen nothing of the first one's keys."""
import json
import os
import subprocess

import pytest

pytest.importorskip("torch")

import ddp_coordinator as ddpc  # noqa: E402
from conftest import ADMIN_TOKEN, bazel_binary, wait_agents  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
AGENT_TIMEOUT_S = 240


def agent_binary():
    return bazel_binary("client/agent", "ddp-client")


def start_agent(coordinator, tmp_path, node, job, token, script_args):
    env = dict(os.environ, PYTHON_EXEC="/usr/bin/python3", GLOO_SOCKET_IFNAME="lo",
               DDP_TOKEN=token,
               PYTHONPATH=os.path.dirname(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = open(tmp_path / f"{node}.log", "w")
    return subprocess.Popen(
        [agent_binary(), "--coordinator", coordinator.address, "--job", job, "--node-id", node,
         "--local-addr", "127.0.0.1", "--log-dir", str(tmp_path / "logs"),
         "--rdzv-conf", "heartbeat_timeout=2,last_call_timeout=1,join_timeout=60",
         "--shutdown-timeout", "3", "--connect-timeout", "30", "--nnodes", "2",
         "--nproc-per-node", "1", "--max-restarts", "2",
         os.path.join(HERE, "store_train.py"), *script_args],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def test_StoreDdp_WorkerFails_GroupRestartsAndFinishesThroughTheStore(secure_coordinator,
                                                                      tmp_path):
    coordinator = secure_coordinator
    results = tmp_path / "results"
    results.mkdir()
    job = "store-ddp"
    with ddpc.Client(coordinator.address, token=ADMIN_TOKEN) as admin:
        token = admin.jobs.create(job, ddpc.JobSettings(
            min_nodes=2, max_nodes=2, nproc_per_node=1, max_restarts=2)).token
    script = ["--init", "url", "--steps", "8", "--fail-at-step", "3", "--fail-rank", "1",
              "--result-dir", str(results)]
    agents = [start_agent(coordinator, tmp_path, node, job, token, script)
              for node in ("node-a", "node-b")]
    codes = wait_agents(agents, AGENT_TIMEOUT_S)
    logs = "\n".join((tmp_path / f"{n}.log").read_text() for n in ("node-a", "node-b"))
    assert codes == [0, 0], logs

    outcome = [json.loads((results / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["restart"] for r in outcome] == [1, 1], outcome
    assert [r["world_size"] for r in outcome] == [2, 2]
    assert outcome[0]["checksum"] == outcome[1]["checksum"]
    generation = outcome[0]["generation"]
    assert generation >= 2 and outcome[1]["generation"] == generation

    with ddpc.Client(coordinator.address, token=ADMIN_TOKEN) as client:
        finished = client.jobs.get(job)
        keys = [kv.key for kv in client.kv(job).items("c10d/")]
    assert finished.state == ddpc.JobState.SUCCEEDED and finished.restart_count == 1
    # The process group met through the store; rank 0 of the last generation deleted the
    # keys of the earlier one.
    scope = f"c10d/r{finished.created_unix_ms}/g{generation}/".encode()
    assert keys, "no key of the c10d store in the job's namespace"
    assert all(k.startswith(scope) for k in keys), keys
    assert scope + b"default_pg/finished" in keys
