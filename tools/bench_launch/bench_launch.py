#!/usr/bin/python3
"""Launch and restart times: ddp-client vs the real torchrun, side by side.

For N local "nodes" x 2 workers, both systems run the same worker script
(bench_worker.py) on the same machine in the same run, trials interleaved:

  launch   from starting the N agents until all 2N workers run (the largest
           time.time() a worker recorded at its first line, minus the moment
           just before the first agent was started; with --stagger S, the last
           agent starts S seconds after the others and the clock starts just
           before it: the job could not start earlier);
  restart  rank 1 of generation 0 exits 1 one second after the whole group is
           up; from the exit time it recorded just before sys.exit until all
           2N workers of the next generation run. That generation exits 0 and
           every system must end with exit code 0 on every agent.

"Run" means past init_process_group and one all_reduce in the gloo variant.
Systems: torchrun, ddp-client, and ddp-prewarm (ddp-client --prewarm
torch,torch.distributed: rank 1 fails only once the agents' standby
interpreters for the next generation have imported torch, as in a job whose
failures come more than a few seconds apart), ddp-inproc (the same with
--in-process-restart, the worker's loop under ddp_coordinator.recovery.run: the
survivors keep their processes; gloo variant only). --fail-soon: the failure
comes 1 s after the group is up, without waiting for the standbys (a crash
right after a restart). --crash: the failing worker ends with os._exit(1)
instead of sys.exit(1) (the teardown of an interpreter with torch loaded
takes 0.3-2.5 s here, counted in the restart otherwise).

torchrun: N processes of /usr/bin/torchrun --rdzv_backend c10d (the first one
to bind the endpoint hosts the TCPStore). ddp-client: one coordinator started
before each trial (not counted, like an existing c10d/etcd endpoint; its start
time is reported separately), then N ddp-client processes.

Variants: "plain" (the worker imports nothing heavy: measures the launcher) and
"gloo" (the worker also runs init_process_group("gloo"); the time after it
counts, so torch's import in every worker is included).

Standard library only; run with /usr/bin/python3 (torchrun's interpreter).
Every process is started in its own session and every wait is bounded; the
trial's process trees are stopped (SIGTERM, then SIGKILL) even on errors.
"""

import argparse
import ctypes
import datetime
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from launch_report import WORKERS_PER_NODE, machine_info, print_report, summarize

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WORKER = os.path.join(HERE, "bench_worker.py")
MONITOR_INTERVAL_S = "0.1"
MAX_RESTARTS = "1"
PREWARM_MODULES = "torch,torch.distributed"
SYSTEMS = ("torchrun", "ddp-client", "ddp-prewarm", "ddp-inproc")

LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z \w \S+\] (.*)$")


class TrialError(Exception):
    pass


# ---------------------------------------------------------------- processes


def become_subreaper():
    """Orphaned workers are re-parented to us, so cleanup still finds them."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def children_map():
    kids = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def descendants(roots):
    kids = children_map()
    seen, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        for child in kids.get(pid, []):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def cmdline_mentions(pid, text):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return text.encode() in f.read()
    except OSError:
        return False


class ProcessSet:
    """The processes of one trial; stop() ends them all, whatever happened."""

    def __init__(self, marker):
        self.marker = marker  # every worker of the trial has it on its command line
        self.procs = []
        self.log_files = []

    def start(self, argv, log_path, env):
        log = open(log_path, "wb")
        self.log_files.append(log)
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def wait_all(self, procs, deadline):
        for proc in procs:
            remaining = deadline - time.time()
            if remaining <= 0:
                return False
            try:
                proc.wait(timeout=remaining)
            except subprocess.TimeoutExpired:
                return False
        return True

    def stop(self, grace_s=3.0):
        roots = [p.pid for p in self.procs if p.poll() is None]
        # Workers that outlived their agent were re-parented to us (subreaper);
        # only those of this trial (marker on their command line) are touched.
        mine = os.getpid()
        strays = [
            pid
            for pid in descendants([mine])
            if pid not in roots and cmdline_mentions(pid, self.marker)
        ]
        victims = set(roots) | descendants(roots) | set(strays)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in victims:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            deadline = time.time() + grace_s
            while time.time() < deadline:
                for p in self.procs:
                    p.poll()
                victims = {pid for pid in victims if alive(pid)}
                if not victims:
                    break
                time.sleep(0.02)
            if not victims:
                break
        for p in self.procs:
            try:
                p.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        # reap stray zombies re-parented to us
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        for log in self.log_files:
            log.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- one trial


def read_starts(out_dir, generation, world):
    starts = {}
    for rank in range(world):
        try:
            with open(os.path.join(out_dir, f"start.g{generation}.rank{rank}")) as f:
                t_start, t_ready, count, _pid = f.read().split()
        except (OSError, ValueError):
            return None
        starts[rank] = (float(t_start), float(t_ready), count)
    return starts


def wait_for(what, predicate, deadline, procs):
    while time.time() < deadline:
        value = predicate()
        if value is not None:
            return value
        for p in procs:
            if p.poll() is not None and p.returncode != 0:
                raise TrialError(f"{what}: an agent exited {p.returncode} first")
        time.sleep(0.005)
    raise TrialError(f"{what}: not within the trial timeout")


def start_coordinator(pset, args, work):
    port_file = os.path.join(work, "coordinator.port")
    argv = [
        args.coordinator,
        "--port", "0",
        "--port-file", port_file,
        "--data-dir", os.path.join(work, "coordinator-data"),
        "--bind", "127.0.0.1",
    ]  # fmt: skip
    t0 = time.time()
    proc = pset.start(argv, os.path.join(work, "coordinator.log"), dict(os.environ))

    def port():
        try:
            with open(port_file) as f:
                text = f.read().strip()
        except OSError:
            return None
        return int(text) if text else None

    p = wait_for("coordinator start", port, t0 + 15.0, [proc])
    return p, time.time() - t0


def agent_argvs(system, args, nodes, endpoint, job, work, out_dir, variant):
    common = [WORKER, out_dir, "inproc" if system == "ddp-inproc" else variant]
    argvs = []
    for node in range(nodes):
        if system == "torchrun":
            argv = [
                args.torchrun,
                "--rdzv_backend", "c10d",
                "--rdzv_endpoint", endpoint,
                "--rdzv_id", job,
                "--nnodes", str(nodes),
                "--nproc_per_node", str(WORKERS_PER_NODE),
                "--max_restarts", MAX_RESTARTS,
                "--monitor_interval", MONITOR_INTERVAL_S,
                "-r", "1", "-t", "1",  # 1.13 crashes with -r 0 -t 0 on Python 3.11
                "--log_dir", os.path.join(work, f"worker-logs{node}"),
            ]  # fmt: skip
        else:
            argv = [
                args.ddp_client,
                "--coordinator", endpoint,
                "--job", job,
                "--nnodes", str(nodes),
                "--nproc-per-node", str(WORKERS_PER_NODE),
                "--max-restarts", MAX_RESTARTS,
                "--monitor-interval", MONITOR_INTERVAL_S,
                "--node-id", f"node{node}",
                "--log-dir", os.path.join(work, f"worker-logs{node}"),
            ]  # fmt: skip
            if system in ("ddp-prewarm", "ddp-inproc"):
                argv += ["--prewarm", PREWARM_MODULES]
            if system == "ddp-inproc":
                argv += ["--in-process-restart"]
            # The failing rank waits for the standbys (BENCH_FAIL_GATE) while its peers block
            # in a collective for it: to the hang rule (--hang-timeout) a node without CPU.
            argv += ["--hang-timeout", "0"]
        argvs.append(argv + common)
    return argvs


def standbys_ready(work, nodes):
    """True once every agent logged a standby per worker since generation 1
    started (None before: wait_for's "not yet")."""
    for i in range(nodes):
        try:
            with open(os.path.join(work, f"agent{i}.log"), errors="replace") as f:
                since = f.read().split("generation 1: starting")
        except OSError:
            return None
        if len(since) < 2 or since[-1].count("it waits for the next generation") < WORKERS_PER_NODE:
            return None
    return True


def run_trial(system, args, nodes, variant, index, root):
    name = f"{system}-n{nodes}-{variant}-{index}"
    work = os.path.join(root, name)
    out_dir = os.path.join(work, "out")
    os.makedirs(out_dir)
    world = nodes * WORKERS_PER_NODE
    result = {"system": system, "nodes": nodes, "variant": variant, "trial": index}
    pset = ProcessSet(out_dir)
    gate = os.path.join(work, "fail-gate")
    env = dict(os.environ, PYTHON_EXEC=args.python, BENCH_FAIL_GATE=gate)
    if args.crash:
        env["BENCH_CRASH"] = "1"
    if system == "ddp-inproc":
        env["DDP_RECOVERY_TRACE"] = "1"  # the wrapper's steps, for ddp_phases
    try:
        if system != "torchrun":
            port, coord_s = start_coordinator(pset, args, work)
            result["coordinator_start_s"] = coord_s
            endpoint = f"127.0.0.1:{port}"
        else:
            endpoint = f"127.0.0.1:{free_port()}"
        argvs = agent_argvs(system, args, nodes, endpoint, name, work, out_dir, variant)
        deadline = time.time() + args.trial_timeout + args.stagger
        t_launch = time.time()
        agents = []
        for i, argv in enumerate(argvs):
            if i == len(argvs) - 1 and args.stagger > 0:
                # The job can start only once the last node is there: the
                # others' agents (and their standbys) were up before it.
                time.sleep(args.stagger)
                t_launch = time.time()
            agents.append(pset.start(argv, os.path.join(work, f"agent{i}.log"), env))
        gen0 = wait_for(
            "generation 0 up", lambda: read_starts(out_dir, 0, world), deadline, agents
        )
        result["launch_s"] = max(v[1] for v in gen0.values()) - t_launch
        result["launch_first_line_s"] = max(v[0] for v in gen0.values()) - t_launch
        if system in ("ddp-prewarm", "ddp-inproc") and not args.fail_soon:
            # Failures come hours apart in training: fail once the next
            # generation's standbys (one per worker, after the first ones) wait.
            wait_for("standbys for generation 1",
                     lambda: standbys_ready(work, nodes), deadline, agents)
        with open(gate, "w"):
            pass

        def exit_time():
            try:
                with open(os.path.join(out_dir, "exit.g0.rank1")) as f:
                    return float(f.read())
            except (OSError, ValueError):
                return None

        t_exit = wait_for("rank 1 exit", exit_time, deadline, agents)
        gen1 = wait_for(
            "generation 1 up", lambda: read_starts(out_dir, 1, world), deadline, agents
        )
        result["restart_s"] = max(v[1] for v in gen1.values()) - t_exit
        result["restart_first_line_s"] = max(v[0] for v in gen1.values()) - t_exit
        counts = [v[2] for v in gen1.values()]
        result["gen1_restart_counts"] = {c: counts.count(c) for c in sorted(set(counts))}
        if not pset.wait_all(agents, deadline):
            raise TrialError("the job did not end within the trial timeout")
        rcs = [p.returncode for p in agents]
        if any(rcs):
            raise TrialError(f"agent exit codes {rcs}, expected all 0")
        if system != "torchrun":
            result["phases"] = ddp_phases(work, nodes, t_launch, gen0, t_exit, gen1)
        if system == "ddp-inproc":
            result["phases"]["recovery"] = inproc_phases(work, nodes, t_exit, gen1)
    except TrialError as e:
        result["error"] = str(e)
        result["logs"] = work
    finally:
        pset.stop()
    return result


def run_floor(args, nodes, index, root):
    """The floor of any launcher: the 2N workers started directly by Popen."""
    work = os.path.join(root, f"floor-n{nodes}-{index}")
    out_dir = os.path.join(work, "out")
    os.makedirs(out_dir)
    world = nodes * WORKERS_PER_NODE
    pset = ProcessSet(out_dir)
    try:
        t_launch = time.time()
        procs = []
        for rank in range(world):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world),
                       LOCAL_RANK=str(rank % WORKERS_PER_NODE),
                       TORCHELASTIC_RESTART_COUNT="0")  # fmt: skip
            argv = [args.python, "-u", WORKER, out_dir, "plain"]
            procs.append(pset.start(argv, os.path.join(work, f"worker{rank}.log"), env))
        gen0 = wait_for("direct workers up", lambda: read_starts(out_dir, 0, world),
                        time.time() + args.trial_timeout, [])  # fmt: skip
        return max(v[0] for v in gen0.values()) - t_launch
    except TrialError:
        return None
    finally:
        pset.stop()


# ------------------------------------------------- where ddp-client's time goes


def log_events(path):
    events = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LOG_LINE.match(line)
            if m:
                stamp = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f")
                t = stamp.replace(tzinfo=datetime.timezone.utc).timestamp()
                events.append((t, m.group(2)))
    return events


def first(events, needle, skip=0):
    hits = [t for t, text in events if needle in text]
    return hits[skip] if len(hits) > skip else None


def ddp_phases(work, nodes, t_launch, gen0, t_exit, gen1):
    """Cumulative times from the agents' timestamped logs (max over agents)."""
    per_agent = [log_events(os.path.join(work, f"agent{i}.log")) for i in range(nodes)]

    def latest(needle, skip=0):
        times = [first(ev, needle, skip) for ev in per_agent]
        return None if None in times else max(times)

    def since(t0, t):
        return None if t is None else t - t0

    detected = [first(ev, "exit code 1") for ev in per_agent]
    detected = [t for t in detected if t is not None]
    return {
        "launch": {
            "agent_main_s": since(t_launch, latest("ddp-client: job")),
            "registered_s": since(t_launch, latest("registered with the coordinator")),
            "workers_spawned_s": since(t_launch, latest("workers, ranks")),
            "workers_up_s": max(v[1] for v in gen0.values()) - t_launch,
        },
        "restart": {
            "failure_seen_s": since(t_exit, min(detected) if detected else None),
            "stop_order_s": since(t_exit, latest("stopping the workers of generation")),
            "workers_spawned_s": since(t_exit, latest("workers, ranks", skip=1)),
            "workers_up_s": max(v[1] for v in gen1.values()) - t_exit,
        },
    }


TRACE_LINE = re.compile(r"^ddp_coordinator\.recovery: trace (\d+\.\d+) rank (\S+) (.*)$")


def inproc_phases(work, nodes, t_exit, gen1):
    """ddp-inproc's recovery step by step (seconds after the failing worker's exit; the
    latest node or rank, "first" where one node or rank does it): the agents' log lines
    and the workers' DDP_RECOVERY_TRACE lines (recovery.py), both in the agents' logs."""
    per_agent = [log_events(os.path.join(work, f"agent{i}.log")) for i in range(nodes)]
    traces = []  # (time, rank, step) after the failure
    for i in range(nodes):
        with open(os.path.join(work, f"agent{i}.log"), errors="replace") as f:
            for line in f:
                m = TRACE_LINE.match(line.strip())
                if m and float(m.group(1)) >= t_exit - 0.001:
                    traces.append((float(m.group(1)), m.group(2), m.group(3)))

    def agents(needle, latest=True):
        times = [t for ev in per_agent for t, text in ev if needle in text and t >= t_exit]
        firsts = []
        for ev in per_agent:
            hits = [t for t, text in ev if needle in text and t >= t_exit]
            if hits:
                firsts.append(hits[0])
        if not times:
            return None
        return (max(firsts) if latest else min(firsts)) - t_exit

    def ranks(word, latest=True):
        firsts = {}
        for t, rank, step in traces:
            if word in step and rank not in firsts:
                firsts[rank] = t
        if not firsts:
            return None
        return (max(firsts.values()) if latest else min(firsts.values())) - t_exit

    return {
        "failure_seen_s": agents("exit code 1", latest=False),
        "stop_order_s": agents("stopping the workers of generation"),
        "abandon_received_s": ranks("abandon"),
        "survivors_parked_s": ranks("parked"),
        "agents_parked_s": agents("left the process group"),
        "master_info_asked_s": agents("this node is group rank 0", latest=False),
        "assignment_applied_s": agents("in-process restart: ranks"),
        "join_received_s": ranks("join"),
        "generation_begins_s": ranks("begins"),
        "process_group_ready_s": ranks("process group ready"),
        "state_synced_s": ranks("state synced"),
        "first_all_reduce_s": max(v[1] for v in gen1.values()) - t_exit,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", default="2,4", help="comma-separated node counts (2 workers each)")
    p.add_argument("--variants", default="plain,gloo", help="plain and/or gloo")
    p.add_argument("--repeat", type=int, default=5, help="trials per system, plain variant")
    p.add_argument("--gloo-repeat", type=int, default=3, help="trials per system, gloo variant")
    p.add_argument("--trial-timeout", type=float, default=90.0, help="seconds per trial")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--json-out", metavar="FILE", help="also write the JSON to FILE")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--coordinator", default=os.path.join(REPO, "bazel-bin/coordinator/coordinator"))
    p.add_argument("--ddp-client", default=os.path.join(REPO, "bazel-bin/client/agent/ddp-client"))
    p.add_argument("--torchrun", default="/usr/bin/torchrun")
    p.add_argument("--python", default="/usr/bin/python3", help="workers' interpreter")
    p.add_argument("--stagger", type=float, default=0.0,
                   help="start the last node's agent this many seconds after the others; "
                   "launch counts from its start")
    p.add_argument("--crash", action="store_true",
                   help="the failing worker ends with os._exit(1) (a crash) instead of "
                   "sys.exit(1), whose interpreter teardown with torch loaded takes seconds")
    p.add_argument("--fail-soon", action="store_true",
                   help="fail 1 s after the group is up, not once the standbys wait")
    p.add_argument("--systems", default=",".join(SYSTEMS),
                   help="which of torchrun,ddp-client,ddp-prewarm (ddp-client --prewarm "
                   + PREWARM_MODULES + ")")
    args = p.parse_args()
    try:
        nodes_list = [int(n) for n in args.nodes.split(",")]
        variants = args.variants.split(",")
        systems_run = args.systems.split(",")
        if (any(n < 1 or n > 16 for n in nodes_list) or not set(variants) <= {"plain", "gloo"}
                or not set(systems_run) <= set(SYSTEMS)):
            raise ValueError(" / ".join((args.nodes, args.variants, args.systems)))
    except ValueError as e:
        p.error(f"bad --nodes, --variants or --systems ({e}): nodes 1..16, variants plain,gloo, "
                f"systems {','.join(SYSTEMS)}")
    for path in (args.coordinator, args.ddp_client, args.torchrun, args.python):
        if not os.access(path, os.X_OK):
            p.error(f"{path} is not executable (build with tools/bench_launch.sh)")

    become_subreaper()
    # SIGTERM/SIGHUP unwind like Ctrl-C, so every trial's finally: stops its processes.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
    root = tempfile.mkdtemp(prefix="ddp-bench-launch.")
    results = []
    try:
        for variant in variants:
            repeat = args.repeat if variant == "plain" else args.gloo_repeat
            for nodes in nodes_list:
                for i in range(repeat):
                    systems = [s for s in systems_run
                               if s != "ddp-inproc" or variant == "gloo"]
                    if i % 2:
                        systems.reverse()  # interleave, alternating which goes first
                    for system in systems:
                        r = run_trial(system, args, nodes, variant, i, root)
                        results.append(r)
                        if not args.json:
                            got = r.get("error") or (f"launch {r['launch_s']:.3f} s, "
                                                     f"restart {r['restart_s']:.3f} s")  # fmt: skip
                            print(f"  {system:11} {nodes}x2 {variant:5} #{i}: {got}",
                                  file=sys.stderr, flush=True)  # fmt: skip
                        time.sleep(0.5)  # let the previous trial's exits settle
                    if variant == "plain":
                        results.append({"system": "floor", "nodes": nodes, "variant": variant,
                                        "trial": i, "floor_s": run_floor(args, nodes, i, root)})
                        time.sleep(0.5)
    except KeyboardInterrupt:
        print("interrupted; reporting the trials done so far", file=sys.stderr)
    finally:
        failed = any("error" in r for r in results)
        if not args.keep and not failed:
            shutil.rmtree(root, ignore_errors=True)
        elif results:
            print(f"work directory kept: {root}", file=sys.stderr)
    rows = summarize(results, nodes_list, variants, systems_run)
    machine = machine_info()
    settings = (f"{WORKERS_PER_NODE} workers per node, max restarts {MAX_RESTARTS}, monitor "
                f"interval {MONITOR_INTERVAL_S} s on both; torchrun --rdzv_backend c10d -r 1 -t 1; "
                f"ddp-client defaults otherwise (ddp-prewarm: --prewarm {PREWARM_MODULES}, "
                f"ddp-inproc: the same and --in-process-restart, "
                + ("the failure 1 s after the group is up" if args.fail_soon else
                   "the failure injected once their standbys wait")
                + f"); failing worker {'os._exit(1)' if args.crash else 'sys.exit(1)'}; "
                f"workers under {args.python}; stagger {args.stagger} s")  # fmt: skip
    report = {"machine": machine, "settings": settings, "rows": rows, "trials": results}
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(report, f, indent=1)
    if args.json:
        json.dump({"machine": machine, "settings": settings, "rows": rows, "trials": results},
                  sys.stdout, indent=1)  # fmt: skip
        print()
    else:
        print_report(results, rows, machine, settings)
    return 1 if not results or any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
