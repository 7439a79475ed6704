"""An unmodified data-parallel CPU training loop (plain torch.distributed with gloo, no
ddp_coordinator import): each step waits --sleep-s ("data loading"), spends --work-ms of
CPU time on its own work (--slow-rank: 50 % more), then all-reduces with the other
ranks, until the file named by --stop exists. Rank 0 writes the number of steps done
to --steps-file after each step (for the test to count them)."""
import argparse
import os
import time

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--stop", required=True)
parser.add_argument("--steps-file", required=True)
parser.add_argument("--sleep-s", type=float, default=0.4)
parser.add_argument("--work-ms", type=float, default=30)
parser.add_argument("--slow-rank", type=int, default=-1)
args = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
work_s = args.work_ms / 1000 * (1.5 if rank == args.slow_rank else 1.0)
grad = torch.zeros(1024)
step = 0
while True:
    stop = torch.tensor([1.0 if os.path.exists(args.stop) else 0.0])
    dist.all_reduce(stop)  # every rank leaves at the same step
    if stop.item() > 0:
        break
    time.sleep(args.sleep_s)
    # The rank's own work: a fixed amount of CPU time, however busy the machine is.
    until = time.process_time() + work_s
    while time.process_time() < until:
        pass
    dist.all_reduce(grad)
    step += 1
    if rank == 0:
        with open(args.steps_file + ".tmp", "w") as f:
            f.write(str(step))
        os.replace(args.steps_file + ".tmp", args.steps_file)
dist.destroy_process_group()
