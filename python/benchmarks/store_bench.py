#!/usr/bin/python3
"""CoordinatorStore (ddp_coordinator.store) against torch's TCPStore, side by side.

1. init_process_group("gloo") of N local ranks (processes), through ``ddp://``, through
   ``tcp://`` (a TCPStore hosted by rank 0) and through a TCPStore whose server was already
   listening (as torchrun's agent store): the time from a common start (every process has
   imported torch) until the last rank has its group, median over --repeats runs, the
   three kinds interleaved.
2. Store operations per second: one client calling set, get, add, check and wait (of a key
   that exists) in a loop, then --clients processes calling set at once (their sum).

The coordinator is started here (bazel-bin/coordinator/coordinator, its data directory in
--work-dir) unless --coordinator names one. Run with Debian's interpreter (torch 1.13):

    bazel build //coordinator //python:stubs
    /usr/bin/python3 python/benchmarks/store_bench.py --ranks 2,4,8 --repeats 5
"""
import argparse
import datetime
import multiprocessing
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))  # this tree's package (stubs: python/generate_stubs.py)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

TIMEOUT = datetime.timedelta(seconds=120)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_coordinator(work_dir):
    binary = os.path.join(REPO, "bazel-bin", "coordinator", "coordinator")
    port_file = os.path.join(work_dir, "port")
    process = subprocess.Popen(
        [binary, "--port", "0", "--bind", "127.0.0.1", "--http-port", "0", "--port-file",
         port_file, "--data-dir", os.path.join(work_dir, "data")],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work_dir, "coordinator.log"), "w"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if os.path.exists(port_file) and open(port_file).read().strip():
            return process, "127.0.0.1:" + open(port_file).read().strip()
        if process.poll() is not None:
            sys.exit(f"the coordinator exited; see {work_dir}/coordinator.log")
        time.sleep(0.02)
    sys.exit("the coordinator wrote no port within 30 s")


# -- 1. init_process_group of N ranks ------------------------------------------------------

def _init_rank(url, rank, world_size, barrier, results):
    import ddp_coordinator.store  # noqa: F401  (ddp://)
    barrier.wait()
    start = time.monotonic()
    if url.startswith("hosted:"):  # a TCPStore server already listening (an agent's store)
        store = dist.TCPStore("127.0.0.1", int(url.split(":")[1]), is_master=False,
                              timeout=TIMEOUT)
        dist.init_process_group("gloo", store=dist.PrefixStore(url, store), rank=rank,
                                world_size=world_size, timeout=TIMEOUT)
    else:
        dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world_size,
                                timeout=TIMEOUT)
    results.put(time.monotonic() - start)
    dist.barrier()  # nobody tears the group down while another rank still sets it up
    dist.destroy_process_group()


def time_init(url, world_size):
    """Seconds until the last of ``world_size`` ranks has its process group."""
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(world_size), ctx.Queue()
    ranks = [ctx.Process(target=_init_rank, args=(url, r, world_size, barrier, results))
             for r in range(world_size)]
    for p in ranks:
        p.start()
    times = [results.get(timeout=TIMEOUT.total_seconds()) for _ in ranks]
    for p in ranks:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"a rank of {url} exited with {p.exitcode}")
    return max(times)


def bench_init(coordinator, rank_counts, repeats):
    """Rows (N, ddp://, tcp://, a hosted TCPStore): median seconds of each."""
    hosted_port = free_port()
    hosted = dist.TCPStore("127.0.0.1", hosted_port, is_master=True, timeout=TIMEOUT)
    rows = []
    for world_size in rank_counts:
        samples = {"ddp": [], "tcp": [], "hosted": []}
        for i in range(repeats):
            job = f"bench-init-{world_size}-{i}-{os.getpid()}"
            samples["ddp"].append(time_init(f"ddp://{coordinator}?job={job}&generation=1",
                                            world_size))
            samples["tcp"].append(time_init(f"tcp://127.0.0.1:{free_port()}", world_size))
            samples["hosted"].append(time_init(f"hosted:{hosted_port}:{world_size}:{i}",
                                               world_size))
        rows.append((world_size, *(statistics.median(samples[k])
                                   for k in ("ddp", "tcp", "hosted"))))
    del hosted
    return rows


# -- 2. operations per second --------------------------------------------------------------

def ops_per_second(store, seconds):
    """{operation: calls per second} of one client calling each in a loop."""
    store.set("present", "1")
    operations = {
        "set": lambda i: store.set(f"k{i % 1000}", "value"),
        "get": lambda i: store.get("present"),
        "add": lambda i: store.add("counter", 1),
        "check": lambda i: store.check(["present"]),
        "wait": lambda i: store.wait(["present"]),
    }
    rates = {}
    for name, operation in operations.items():
        if name == "check" and not hasattr(store, "check"):
            continue  # torch 1.13's TCPStore has no check() in Python
        calls, start = 0, time.monotonic()
        while time.monotonic() - start < seconds:
            operation(calls)
            calls += 1
        rates[name] = calls / (time.monotonic() - start)
    return rates


def _set_loop(make_store, client, seconds, barrier, results):
    store = make_store(client)
    barrier.wait()
    calls, start = 0, time.monotonic()
    while time.monotonic() - start < seconds:
        store.set(f"c{client}/k{calls % 1000}", "value")
        calls += 1
    results.put(calls / (time.monotonic() - start))


def concurrent_sets(make_store, clients, seconds):
    # spawn, not fork: this process holds gRPC channels by now, which a fork must not copy.
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(clients), ctx.Queue()
    workers = [ctx.Process(target=_set_loop, args=(make_store, c, seconds, barrier, results))
               for c in range(clients)]
    for w in workers:
        w.start()
    total = sum(results.get(timeout=seconds + 60) for _ in workers)
    for w in workers:
        w.join()
    return total


class _CoordinatorStores:
    def __init__(self, address):
        self.address = address

    def __call__(self, client=0):
        from ddp_coordinator.store import CoordinatorStore
        return CoordinatorStore(self.address, job=f"bench-ops-{os.getpid()}", generation=1)


class _TcpStores:
    def __init__(self, port):
        self.port = port

    def __call__(self, client=0):
        return dist.TCPStore("127.0.0.1", self.port, is_master=False, timeout=TIMEOUT)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--coordinator", help="HOST:PORT of a running coordinator")
    parser.add_argument("--work-dir", help="for the coordinator started here (default: tmp)")
    parser.add_argument("--ranks", default="2,4,8", help="comma-separated rank counts")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0, help="per operation")
    parser.add_argument("--clients", type=int, default=4, help="concurrent set clients")
    args = parser.parse_args()
    # Line by line: the forked ranks must not inherit (and print again) unflushed output.
    sys.stdout.reconfigure(line_buffering=True)
    rank_counts = [int(n) for n in args.ranks.split(",")]
    if any(n < 1 or n > 64 for n in rank_counts):
        sys.exit(f"--ranks {args.ranks}: each count must be 1..64 local processes")

    coordinator_process = None
    address = args.coordinator
    if not address:
        work_dir = args.work_dir or tempfile.mkdtemp(prefix="store_bench_")
        os.makedirs(work_dir, exist_ok=True)
        coordinator_process, address = start_coordinator(work_dir)
        print(f"coordinator {address}, data in {work_dir}")
    print(f"{platform.node()}: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, "
          f"torch {torch.__version__}")
    try:
        print("\ninit_process_group('gloo'), N local ranks: seconds until the last rank has its "
              f"group (median of {args.repeats})")
        print(f"{'N':>4} {'ddp:// (coordinator)':>22} {'tcp:// (TCPStore)':>19} "
              f"{'TCPStore already up':>20}")
        for world_size, ddp_s, tcp_s, hosted_s in bench_init(address, rank_counts,
                                                             args.repeats):
            print(f"{world_size:>4} {ddp_s:>22.3f} {tcp_s:>19.3f} {hosted_s:>20.3f}")

        tcp_port = free_port()
        tcp_server = dist.TCPStore("127.0.0.1", tcp_port, is_master=True, timeout=TIMEOUT)
        stores = {"CoordinatorStore": _CoordinatorStores(address), "TCPStore": _TcpStores(tcp_port)}
        rates = {name: ops_per_second(make(), args.seconds) for name, make in stores.items()}
        print(f"\nstore operations per second, one client ({args.seconds:g} s each)")
        print(f"{'op':>6} {'CoordinatorStore':>17} {'TCPStore':>10}")
        for op in rates["CoordinatorStore"]:
            tcp = rates["TCPStore"].get(op)
            print(f"{op:>6} {rates['CoordinatorStore'][op]:>17,.0f} "
                  f"{(f'{tcp:,.0f}' if tcp else 'n/a'):>10}")
        print(f"\nset, {args.clients} clients at once (operations per second, summed)")
        for name, make in stores.items():
            print(f"{name:>17} {concurrent_sets(make, args.clients, args.seconds):>10,.0f}")
        del tcp_server
    finally:
        if coordinator_process is not None:
            coordinator_process.send_signal(signal.SIGTERM)
            coordinator_process.wait(10)


if __name__ == "__main__":
    main()
