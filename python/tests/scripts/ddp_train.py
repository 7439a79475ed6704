"""A small gloo DDP training run, started by torchrun in the torchrun tests.

Writes RESULT_DIR/rank<RANK>: "<world size> <restart count> <group rank> <weight sum>".
With FAIL_ONCE_MARKER set, the last rank exits with code 3 after its training steps the
first time (it creates the marker file), so the group has to be restarted once. With
STEP_SECONDS set, each of the 5 steps takes that long (a run to restart a coordinator under).
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        optimizer.zero_grad()
        model(torch.full((8, 4), float(rank + 1))).sum().backward()
        optimizer.step()
        time.sleep(float(os.environ.get("STEP_SECONDS", "0")))
    marker = os.environ.get("FAIL_ONCE_MARKER")
    if marker and rank == world_size - 1 and not os.path.exists(marker):
        open(marker, "w").close()
        print(f"rank {rank}: failing on purpose", file=sys.stderr, flush=True)
        sys.exit(3)
    dist.barrier()
    weight_sum = float(sum(p.detach().sum() for p in model.parameters()))
    with open(os.path.join(os.environ["RESULT_DIR"], f"rank{rank}"), "w") as f:
        f.write(f"{world_size} {os.environ['TORCHELASTIC_RESTART_COUNT']} "
                f"{os.environ['GROUP_RANK']} {weight_sum:.6f}\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
