#!/usr/bin/env python3
"""A deterministic gloo DDP training under ddp_coordinator.recovery.run, for the tests of the
in-process restart. Run by ddp-client (--in-process-restart or not).

Every rank trains the same bias-free Linear model (seed 0) with SGD and momentum for --steps steps;
the data of step S on rank R depends only on S and R, so the parameters at the end do not
depend on how many processes took part in getting there. The rank --fail-rank exits with
code 3 at the start of step --fail-at-step, once (a marker file in --result-dir says it did).
With --step-delay, every step also takes that long and each rank records where it is in
--result-dir/progress.rank<R>.json (step, pid, the parent's pid: its agent's).
At the end every rank writes --result-dir/rank<R>.json: the parameters, whether this process
survived a generation, its pid, the generations it ran.
"""
import argparse
import datetime
import json
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ddp_coordinator import recovery


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--fail-at-step", type=int, default=-1)
    parser.add_argument("--fail-rank", type=int, default=3)
    parser.add_argument("--stubborn-rank", type=int, default=-1,
                        help="this rank swallows the error of the interrupted step and sleeps "
                        "instead of leaving the group (never parks)")
    parser.add_argument("--step-delay", type=float, default=0.0,
                        help="seconds each step sleeps; > 0: progress.rank<R>.json each step")
    parser.add_argument("--result-dir", required=True)
    args = parser.parse_args()

    torch.manual_seed(0)
    # One parameter tensor: DDP's gradient bucket has the same layout in a DDP made anew
    # after a failure as in one made at the start (with several, the first iteration of a
    # new DDP orders them differently, which changes the all-reduce's summation order and
    # the last bits of the result).
    model = torch.nn.Linear(8, 2, bias=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    state = {"model": model, "optimizer": optimizer, "step": 0}
    generations = []
    marker = os.path.join(args.result_dir, "failed-once")

    def train(state, generation):
        generations.append(generation.generation)
        ddp = DistributedDataParallel(state["model"])
        rank, world = generation.rank, generation.world_size
        while state["step"] < args.steps:
            step = state["step"]
            if step == args.fail_at_step and rank == args.fail_rank and \
                    not os.path.exists(marker):
                open(marker, "w").close()
                print(f"rank {rank}: failing at step {step} as asked", flush=True)
                os._exit(3)
            data = torch.Generator().manual_seed(step * world + rank)
            x = torch.randn(16, 8, generator=data)
            loss = ((ddp(x) - x[:, :2]) ** 2).mean()
            state["optimizer"].zero_grad()
            try:
                loss.backward()
            except RuntimeError:
                if rank == args.stubborn_rank:
                    time.sleep(600)  # stopped by its agent long before
                raise
            state["optimizer"].step()
            state["step"] = step + 1
            if args.step_delay > 0:
                write_json(os.path.join(args.result_dir, f"progress.rank{rank}.json"),
                           {"step": state["step"], "pid": os.getpid(), "ppid": os.getppid()})
                time.sleep(args.step_delay)
        return generation

    last = recovery.run(train, state, timeout=datetime.timedelta(seconds=60))
    result = {
        "rank": last.rank,
        "world_size": last.world_size,
        "survivor": last.survivor,
        "replaced_ranks": last.replaced_ranks,
        "generations": generations,
        "pid": os.getpid(),
        "step": state["step"],
        "parameters": [p.detach().double().flatten().tolist() for p in model.parameters()],
    }
    write_json(os.path.join(args.result_dir, f"rank{last.rank}.json"), result)


def write_json(path, value):
    with open(path + ".tmp", "w") as f:
        json.dump(value, f)
    os.rename(path + ".tmp", path)


if __name__ == "__main__":
    main()
