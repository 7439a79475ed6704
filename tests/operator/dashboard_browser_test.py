#!/usr/bin/python3
"""The dashboard in a real browser: headless Chromium (Debian's package) driven
over the DevTools protocol (a pipe, no driver download, Python's standard
library only), against a real coordinator running a real job (a ddp-client
with two workers).

The test loads the jobs page and sees the job running in generation 1; opens
the job page; injects a worker failure and sees, with no reload, the
generation change to 2 and the failure listed; injects a second failure that
exhausts the restart budget and finds the root cause on the page. The jobs
list then names the failing node and its reason, and the finished job's age
stays put.

A second job of two nodes loses one (its agent killed) while the other's
worker fails after it: the failure row names the lost node and says 'node
lost' (no '-1 / -1', no 'exit code 0'); the job waits, saying for what and
counting down to its join timeout, and stands out in the jobs list; each
generation's lost time is a number (the coordinator's Job.time: the first job's
generation 1 shows the work lost since the checkpoint its worker reported). The node comes back, the job succeeds and
its page lists both nodes as the last generation's members (not spares). The
key-value page lists the namespaces; the nodes page shows a cordoned node, a
draining node with its countdown, and the quarantine policy set through REST. Screenshots go to the test's outputs
(bazel-testlogs/.../test.outputs).
"""
import re
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

JOB = "dash-e2e"
DRAIN_JOB = "dash-drain"
LOSS_JOB = "dash-loss"
ADMIN_TOKEN = "admin-token-of-the-dashboard-test"

sys.path.insert(0, os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"], "tools/cdp"))
from cdp_browser import Browser, text  # noqa: E402


def screenshot(browser, name):
    out = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR")
    if out:
        browser.screenshot(os.path.join(out, name))
        log(f"screenshot {name}")


def log(*args):
    print(*args, flush=True)


def runfile(path):
    return os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"], path)


def wait_for(what, predicate, timeout=60.0):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def job_state(http, job):
    """The job's state through REST; None while it does not exist yet."""
    try:
        return json.load(urllib.request.urlopen(f"{http}/v1/jobs/{job}", timeout=10)).get("state")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


def start_agent(work, grpc, job, node, script, log_name):
    return subprocess.Popen(
        [runfile("client/agent/ddp-client"), "--coordinator", grpc, "--rdzv-id", job,
         "--nnodes", "2", "--nproc-per-node", "1", "--max-restarts", "1",
         "--node-id", node, "--local-addr", "127.0.0.1",
         "--no-python", "/bin/sh", "-c", script],
        stdout=open(f"{work}/{log_name}", "w"), stderr=subprocess.STDOUT,
        start_new_session=True)


def check_node_loss(browser, http, work, processes):
    """Two nodes; one is killed, the other's worker fails after it (a knock-on)."""
    grpc = f"127.0.0.1:{open(f'{work}/port').read().strip()}"
    # Each worker exits 0 once `succeed` exists; the first to see `knock`
    # fails (exit 3) once.
    script = (f'while true; do [ -e {work}/succeed ] && exit 0; '
              f'if [ -e {work}/knock ] && mkdir {work}/knocked 2>/dev/null; then '
              'echo "peer gone" >&2; exit 3; fi; sleep 0.1; done')
    node_a = start_agent(work, grpc, LOSS_JOB, "node-a2", script, "agent-a2.log")
    processes.append(node_a)
    node_b = start_agent(work, grpc, LOSS_JOB, "node-b2", script, "agent-b2.log")
    processes.append(node_b)
    browser.navigate(f"{http}/#/jobs/{LOSS_JOB}")
    wait_for("the two-node job running", lambda: text(browser, "[data-field=state]") == "RUNNING", 60)

    os.killpg(node_b.pid, signal.SIGKILL)  # its session closes at once
    node_b.wait(10)
    time.sleep(0.5)  # the coordinator sees the session closed: the failure is a knock-on
    open(f"{work}/knock", "w").close()
    lost_row = wait_for("the node-loss failure row",
                        lambda: text(browser, "tr[data-failure=node-lost]"), 60)
    assert "node-b2" in lost_row and "node lost" in lost_row, lost_row
    waiting = wait_for("WAITING with its reason and countdown",
                       lambda: text(browser, "[data-field=waiting]"), 60)
    log(f"waiting line: {waiting}")
    assert re.search(r"waiting for 1 more node .*node-b2.*; join timeout in \d+ m \d\d s", waiting), waiting
    assert browser.evaluate("!!document.querySelector('[data-field=state] .state-degraded')"), \
        "a job waiting after a loss is not shown as a calm WAITING"
    wait_for("the countdown running", lambda: text(browser, "[data-field=countdown]") not in waiting, 5)
    page = text(browser, "main")
    for garbage in ("-1 / -1", "exit code 0", "undefined", "NaN"):
        assert garbage not in page, f"the page shows {garbage!r}: {page}"
    lost = text(browser, '[data-generation="1"] [data-field=lost]')
    ran = text(browser, '[data-generation="1"] [data-field=ran]')
    assert re.fullmatch(r"[\d.]+ (ms|s|min|h|d)", lost or "") and re.fullmatch(r"[\d.]+ (ms|s|min|h|d)", ran or ""), \
        f"generation 1: lost {lost!r}, ran {ran!r}"
    assert re.search(r"\d", text(browser, '[data-generation="next"] [data-field=lost]') or ""), \
        "the time lost since the restart"
    screenshot(browser, "7-job-waiting-after-node-loss.png")

    browser.navigate(f"{http}/#/jobs")
    degraded = f'tr[data-job="{LOSS_JOB}"]'
    problem = wait_for("the degraded job in the list", lambda: text(browser, f"{degraded} [data-field=problem]"))
    assert "waiting for 1 more node" in problem and "node-b2: node lost" in problem, problem
    assert browser.evaluate(f"document.querySelector('{degraded}').classList.contains('row-degraded')")
    screenshot(browser, "8-jobs-degraded-and-failed.png")

    # The node comes back; generation 2 runs and succeeds.
    node_b = start_agent(work, grpc, LOSS_JOB, "node-b2", script, "agent-b2-again.log")
    processes.append(node_b)
    browser.navigate(f"{http}/#/jobs/{LOSS_JOB}")
    wait_for("generation 2 running", lambda: text(browser, "[data-field=state]") == "RUNNING"
             and text(browser, "[data-field=generation]") == "2", 60)
    open(f"{work}/succeed", "w").close()
    wait_for("the job succeeded", lambda: text(browser, "[data-field=state]") == "SUCCEEDED", 60)
    wait_for("both nodes as members of the finished job",
             lambda: text(browser, '[data-node="node-a2"]') and text(browser, '[data-node="node-b2"]'))
    page = text(browser, "main")
    assert "Members of generation 2" in page and "Spares" not in page, page
    assert "No members" not in page, page
    screenshot(browser, "9-job-succeeded-members.png")


def check_lost_time_numbers(browser, http):
    """Generation 1 ended by a failure after rank 0's checkpoint (report_checkpoint's fields in
    its progress file): the page shows, as numbers, the coordinator's own account (Job.time),
    not figures of its own."""
    job = json.loads(urllib.request.urlopen(f"{http}/v1/jobs/{JOB}", timeout=10).read())
    first = job["time"]["generations"][0]
    log(f"generation 1 in the API: {first}")
    assert first["generation"] == "1" and first["endedBy"] == "worker_failure", first
    assert first["lastCheckpointStep"] == "40" and int(first["workLostMs"]) > 0, first
    for field, key in (("ran", "trainingMs"), ("work-lost", "workLostMs")):
        shown = wait_for(f"generation 1's {field}",
                         lambda: text(browser, f'[data-generation="1"] [data-field={field}]'))
        expected = browser.evaluate(f"duration({int(first[key])})")
        assert shown == expected, f"{field}: the page shows {shown!r}, the API {first[key]} ms"
    lost = text(browser, '[data-generation="2"] [data-field=lost]')
    downtime = int(job["time"]["generations"][1].get("detectionMs", 0)) + \
        int(job["time"]["generations"][1].get("rendezvousMs", 0))
    assert lost == browser.evaluate(f"duration({downtime})"), (lost, job["time"])
    assert "step 40" in text(browser, '[data-generation="1"] [data-field=checkpoint]')
    total = text(browser, "[data-field=lost-total]")
    assert "work since checkpoint" in total and "NaN" not in total, total


def main():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        log("SKIPPED: chromium is not installed (tools/setup.sh installs it)")
        return 0
    work = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    processes = []
    browser = None
    try:
        coordinator = subprocess.Popen(
            [runfile("coordinator/coordinator"), "--port", "0", "--bind", "127.0.0.1",
             "--port-file", f"{work}/port", "--http-port-file", f"{work}/http_port",
             "--data-dir", f"{work}/data"],
            stderr=open(f"{work}/coordinator.log", "w"))
        processes.append(coordinator)
        wait_for("the coordinator's ports", lambda: os.path.exists(f"{work}/http_port"), 20)
        time.sleep(0.1)
        grpc = f"127.0.0.1:{open(f'{work}/port').read().strip()}"
        http = f"http://127.0.0.1:{open(f'{work}/http_port').read().strip()}"
        # Local rank 1 fails (exit 7) when the test creates fail<restart count>.
        script = (f'if [ "$LOCAL_RANK" = 1 ]; then f={work}/fail$TORCHELASTIC_RESTART_COUNT; '
                  'while [ ! -e "$f" ]; do sleep 0.1; done; echo "injected failure" >&2; exit 7; '
                  'fi; printf \'{"step": 42, "metrics": {"loss": 0.5}, "checkpoint_unix_ms": "%s", '
                  '"checkpoint_step": 40}\' "$(date +%s%3N)" > "$DDP_PROGRESS_FILE"; '
                  'exec sleep 600')
        agent = subprocess.Popen(
            [runfile("client/agent/ddp-client"), "--coordinator", grpc, "--rdzv-id", JOB,
             "--nnodes", "1", "--nproc-per-node", "2", "--max-restarts", "1",
             "--node-id", "node-a", "--local-addr", "127.0.0.1",
             "--no-python", "/bin/sh", "-c", script],
            stdout=open(f"{work}/agent.log", "w"), stderr=subprocess.STDOUT,
            start_new_session=True)
        processes.append(agent)

        browser = Browser(chromium, f"{work}/profile")
        browser.navigate(f"{http}/#/jobs")
        row = f'tr[data-job="{JOB}"]'
        wait_for("the job, running, in the jobs list",
                 lambda: text(browser, f"{row} [data-field=state]") == "RUNNING")
        assert text(browser, f"{row} [data-field=generation]") == "1"
        nodes = text(browser, f"{row} [data-field=nodes]")
        assert nodes.startswith("1 "), f"the list counts the member: {nodes!r}"
        screenshot(browser, "1-jobs.png")

        browser.evaluate(f"document.querySelector('{row} a').click()")
        wait_for("the job page with its member",
                 lambda: text(browser, '[data-node="node-a"]'))
        browser.evaluate("window.__sameDocument = true")
        assert text(browser, "[data-field=generation]") == "1"
        # Local rank 0 reported its progress (report_progress's file): its row, step and
        # metrics, once the agent relayed it (it reads the files every 5 s).
        wait_for("rank 0's progress", lambda: text(browser, 'tr[data-rank="0"] [data-field=step]') == "42",
                 30)
        progress = text(browser, 'tr[data-rank="0"]')
        assert "loss=0.5000" in progress and "node-a / 0" in progress, progress
        screenshot(browser, "2-job-generation-1.png")

        open(f"{work}/fail0", "w").close()
        wait_for("generation 2 on the page, live",
                 lambda: text(browser, "[data-field=generation]") == "2", 60)
        wait_for("the restart counted", lambda: text(browser, "[data-field=restarts]") == "1 / 1")
        wait_for("the failure listed", lambda: "exit code 7" in (text(browser, "main") or ""))
        assert browser.evaluate("window.__sameDocument === true"), "the page was reloaded"
        check_lost_time_numbers(browser, http)
        screenshot(browser, "3-job-generation-2.png")

        open(f"{work}/fail1", "w").close()
        wait_for("the job failed", lambda: text(browser, "[data-field=state]") == "FAILED", 60)
        cause = wait_for("the root cause", lambda: text(browser, "[data-field=root-cause]"))
        log(f"root cause on the page: {cause}")
        assert "node-a" in cause and "exit code 7" in cause and "rank 1" in cause, cause
        assert "generation 2" in cause, cause
        # The worker's own words travel (issue 25.1): its stderr tail and
        # where its whole stderr is, in the root-cause box and the row.
        logs = text(browser, "[data-field=root-logs]")
        assert logs and "node-a:" in logs and logs.endswith("/stderr.log"), logs
        assert "injected failure" in (browser.evaluate(
            "document.querySelector('[data-field=root-stderr] pre').textContent") or ""), cause
        assert "injected failure" in (text(browser, "[data-field=failure-error]") or ""), \
            text(browser, "main")
        page = text(browser, "main")
        for garbage in ("[object ", "undefined", "NaN"):
            assert garbage not in page, f"the page shows {garbage!r}: {page}"
        assert browser.evaluate("window.__sameDocument === true"), "the page was reloaded"
        screenshot(browser, "4-job-failed-root-cause.png")

        # The jobs list names the failing node and the reason; a finished
        # job's age no longer grows.
        browser.navigate(f"{http}/#/jobs")
        problem = wait_for("the failed job's reason in the list",
                           lambda: text(browser, f"{row} [data-field=problem]"))
        assert "node-a" in problem and "exit code 7" in problem, problem
        assert browser.evaluate(f"document.querySelector('{row}').classList.contains('row-failed')")
        age = text(browser, f"{row} [data-field=age]")
        time.sleep(1.5)
        assert text(browser, f"{row} [data-field=age]") == age, "a finished job's age grew"

        check_node_loss(browser, http, work, processes)

        # The key-value page lists the namespaces that hold keys.
        request = urllib.request.Request(
            f"{http}/v1/kv/{JOB}/note", method="PUT", data=json.dumps({"value": "aGVsbG8="}).encode(),
            headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).read()
        browser.navigate(f"{http}/#/kv")
        keys = wait_for("the namespaces listed",
                        lambda: text(browser, f'tr[data-namespace="{JOB}"] td.num'))
        assert re.fullmatch(r"[1-9]\d*", keys), f"the namespace's key count: {keys!r}"
        screenshot(browser, "5-kv-namespaces.png")
        browser.evaluate(f"document.querySelector('tr[data-namespace=\"{JOB}\"] a').click()")
        wait_for("the key-value browser", lambda: "keys at revision" in (text(browser, "main") or ""))
        assert "note" in text(browser, "main")
        screenshot(browser, "5-kv.png")

        # The nodes page (the fleet's ledger): node-a's worker failure is an
        # incident; cordoned through REST, it shows so with the reason.
        request = urllib.request.Request(
            f"{http}/v1/nodes/node-a:cordon", method="POST",
            data=json.dumps({"reason": "fan replacement"}).encode(),
            headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).read()
        browser.navigate(f"{http}/#/nodes")
        state = wait_for("node-a on the nodes page",
                         lambda: text(browser, 'tr[data-node="node-a"] [data-field=state]'))
        assert state == "cordoned", state
        assert "fan replacement" in text(browser, 'tr[data-node="node-a"] [data-field=why]')
        incidents = text(browser, 'tr[data-node="node-a"] [data-field=incidents]')
        assert re.fullmatch(r"[1-9]\d*", incidents), f"node-a's incidents: {incidents!r}"
        policy = text(browser, "#quarantine-policy")
        assert policy.startswith("Quarantine: never") and "--quarantine-after" in policy, policy
        # A draining node (DrainNode through REST, a long grace: its worker
        # never says it is ready) shows as draining with its countdown.
        drained = subprocess.Popen(
            [runfile("client/agent/ddp-client"), "--coordinator", grpc, "--rdzv-id", DRAIN_JOB,
             "--nnodes", "1", "--nproc-per-node", "1", "--node-id", "node-d",
             "--local-addr", "127.0.0.1", "--no-python", "/bin/sh", "-c", "exec sleep 600"],
            stdout=open(f"{work}/agent-d.log", "w"), stderr=subprocess.STDOUT,
            start_new_session=True)
        processes.append(drained)
        wait_for("the drain job running", lambda: job_state(http, DRAIN_JOB) == "RUNNING", 60)
        request = urllib.request.Request(
            f"{http}/v1/nodes/node-d:drain", method="POST",
            data=json.dumps({"graceMs": "600000", "reason": "kernel update"}).encode(),
            headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).read()
        state = wait_for("node-d draining on the nodes page", lambda: (
            text(browser, 'tr[data-node="node-d"] [data-field=state]') == "draining" or None), 30)
        why = text(browser, 'tr[data-node="node-d"] [data-field=why]')
        assert f"job {DRAIN_JOB}" in why and "kernel update" in why, why
        leaves_in = text(browser, 'tr[data-node="node-d"] [data-field=leaves-in]')
        assert re.fullmatch(r"(9|10) m \d\d s", leaves_in), f"the countdown: {leaves_in!r}"

        # The cluster's policy, set through REST, shows on the page.
        request = urllib.request.Request(
            f"{http}/v1/nodes:quarantinePolicy", method="PUT",
            data=json.dumps({"after": 3, "windowMs": "7200000"}).encode(),
            headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).read()
        policy = wait_for("the policy set through the API", lambda: (
            text(browser, "#quarantine-policy") if "set through the API"
            in (text(browser, "#quarantine-policy") or "") else None))
        assert "after 3 counted incidents within 2.0 h" in policy, policy
        screenshot(browser, "6-nodes.png")

        # With authorization on, the dashboard asks for a token, then works,
        # its job page following the event stream through fetch.
        with open(f"{work}/admin.token", "w") as f:
            f.write(ADMIN_TOKEN + "\n")
        secured = subprocess.Popen(
            [runfile("coordinator/coordinator"), "--port", "0", "--bind", "127.0.0.1",
             "--port-file", f"{work}/port2", "--http-port-file", f"{work}/http_port2",
             "--data-dir", f"{work}/data2", "--admin-token-file", f"{work}/admin.token"],
            stderr=open(f"{work}/coordinator2.log", "w"))
        processes.append(secured)
        wait_for("the second coordinator's ports", lambda: os.path.exists(f"{work}/http_port2"), 20)
        time.sleep(0.1)
        http2 = f"http://127.0.0.1:{open(f'{work}/http_port2').read().strip()}"
        request = urllib.request.Request(
            f"{http2}/v1/jobs", method="POST",
            data=json.dumps({"jobId": "secured", "settings": {"minNodes": 1, "maxNodes": 1}}).encode(),
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).read()
        browser.navigate(f"{http2}/#/jobs")
        wait_for("the token form", lambda: browser.evaluate("!!document.querySelector('form.token')"))
        browser.evaluate("document.querySelector('form.token input').value = %s;"
                         "document.querySelector('form.token').requestSubmit()" % json.dumps(ADMIN_TOKEN))
        wait_for("the jobs list with the token",
                 lambda: text(browser, 'tr[data-job="secured"] [data-field=state]') == "WAITING")
        browser.evaluate("document.querySelector('tr[data-job=\"secured\"] a').click()")
        wait_for("the job page with the token",
                 lambda: text(browser, "[data-field=state]") == "WAITING")
        screenshot(browser, "6-token.png")
        log("PASSED: the dashboard showed the job live, its restart and its root cause, "
            "and asked for a token where authorization is on")
        return 0
    except Exception:
        for name in ("coordinator.log", "agent.log", "agent-a2.log", "agent-b2.log", "agent-b2-again.log"):
            path = f"{work}/{name}"
            if os.path.exists(path):
                log(f"--- {name} (tail)")
                log("".join(open(path).readlines()[-30:]))
        if browser:
            try:
                screenshot(browser, "failure.png")
            except Exception:  # the browser may be gone
                pass
        raise
    finally:
        if browser:
            browser.close()
        for process in reversed(processes):
            try:
                os.killpg(process.pid, signal.SIGTERM) if process is not processes[0] else None
            except ProcessLookupError:
                pass
            process.terminate()
        for process in processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()


if __name__ == "__main__":
    sys.exit(main())
