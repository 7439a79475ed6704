import time

T_START = time.time()  # first statement: the moment the launcher's work is done

# Worker of tools/bench_launch/bench_launch.py; the same file runs under
# torchrun and under ddp-client. It deliberately imports nothing heavy at the
# top (no torch), so the "plain" variant measures the launcher, not torch's
# import.
#
#   bench_worker.py OUT_DIR plain|gloo|inproc
#
# inproc: the gloo variant's work inside ddp_coordinator.recovery.run (ddp-client
# --in-process-restart): in generation 0 the ranks other than 1 all-reduce in a loop
# (training) until the failure takes them out of the group; the survivors' next call of
# the loop is their next generation (t_start = when it was called).
#
# Generation 0: record the start; rank 1 waits until every rank of the
# generation is up, sleeps 1 s (and until the file $BENCH_FAIL_GATE exists,
# when set), records its exit time and exits 1; the others
# sleep until the launcher stops them. Generation 1: record the start and exit 0
# once every rank of the generation has started. The generation is counted from
# files, not from TORCHELASTIC_RESTART_COUNT: torchrun bumps that count only on
# the node whose worker failed (pytorch#108158). The count is recorded anyway.
#
# Files (written atomically: temporary name + rename):
#   start.g<G>.rank<R>  "<t_start> <t_ready> <restart_count> <pid>"
#                       (t_ready = after init_process_group and one all_reduce
#                       in the gloo variant, = t_start in the plain variant)
#   exit.g<G>.rank<R>   "<t_exit>"

import os
import sys

MAX_WAIT_S = 120.0  # bound of every wait; the benchmark gives up long before
FAIL_AFTER_S = 1.0  # how long rank 1 of generation 0 lives once the group is up


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def claim_generation(out_dir, rank):
    """Returns the first generation with no start file of this rank yet."""
    generation = 0
    while os.path.exists(os.path.join(out_dir, f"start.g{generation}.rank{rank}")):
        generation += 1
    return generation


def wait_for_all(out_dir, generation, world_size):
    deadline = time.time() + MAX_WAIT_S
    names = [f"start.g{generation}.rank{r}" for r in range(world_size)]
    while time.time() < deadline:
        if all(os.path.exists(os.path.join(out_dir, n)) for n in names):
            return True
        time.sleep(0.01)
    return False


def fail_rank1_of_generation0(out_dir, rank, world_size):
    if not wait_for_all(out_dir, 0, world_size):
        sys.exit(3)
    time.sleep(FAIL_AFTER_S)
    # The launcher may hold the failure until it is ready for it (a
    # --prewarm agent's standbys for the next generation imported).
    gate = os.environ.get("BENCH_FAIL_GATE")
    while gate and not os.path.exists(gate) and time.time() < T_START + MAX_WAIT_S:
        time.sleep(0.01)
    write_atomically(os.path.join(out_dir, f"exit.g0.rank{rank}"), f"{time.time():.6f}\n")
    if os.environ.get("BENCH_CRASH"):
        os._exit(1)  # a crash: gone at once (no interpreter teardown: torch's takes seconds)
    sys.exit(1)


def run_in_process(out_dir):
    import datetime

    import torch
    import torch.distributed as dist
    from ddp_coordinator import recovery

    def loop(state, g):
        t_start = T_START if not g.survivor else time.time()
        generation = claim_generation(out_dir, g.rank)
        total = torch.ones(1)
        dist.all_reduce(total)  # "training resumed": past the first collective
        if int(total.item()) != g.world_size:
            sys.exit(5)
        t_ready = time.time()
        write_atomically(
            os.path.join(out_dir, f"start.g{generation}.rank{g.rank}"),
            f"{t_start:.6f} {t_ready:.6f} {g.restart_count} {os.getpid()}\n",
        )
        if generation == 0:
            if g.rank == 1:
                fail_rank1_of_generation0(out_dir, g.rank, g.world_size)
            while time.time() < T_START + MAX_WAIT_S:  # training until the failure
                dist.all_reduce(torch.ones(1))
                time.sleep(0.01)
            sys.exit(4)
        if not wait_for_all(out_dir, generation, g.world_size):
            sys.exit(3)

    recovery.run(loop, {"step": 0}, timeout=datetime.timedelta(seconds=60))
    sys.exit(0)


def main():
    out_dir, variant = sys.argv[1], sys.argv[2]
    if variant == "inproc":
        run_in_process(out_dir)
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    restart_count = os.environ.get("TORCHELASTIC_RESTART_COUNT", "?")
    generation = claim_generation(out_dir, rank)

    t_ready = T_START
    if variant == "gloo":
        import datetime

        import torch
        import torch.distributed as dist

        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
        total = torch.ones(1)
        dist.all_reduce(total)  # "training resumed": past the first collective
        if int(total.item()) != world_size:
            sys.exit(5)
        t_ready = time.time()
    write_atomically(
        os.path.join(out_dir, f"start.g{generation}.rank{rank}"),
        f"{T_START:.6f} {t_ready:.6f} {restart_count} {os.getpid()}\n",
    )

    if generation == 0:
        if rank == 1:
            fail_rank1_of_generation0(out_dir, rank, world_size)
        time.sleep(MAX_WAIT_S)  # stopped by the launcher long before
        sys.exit(4)
    if not wait_for_all(out_dir, generation, world_size):
        sys.exit(3)
    sys.exit(0)


if __name__ == "__main__":
    main()
