#!/usr/bin/env python3
"""A small gloo DDP training whose process group meets through the coordinator's c10d
store (ddp_coordinator.store), for the tests of that store. Run by ddp-client (or by a
test with RANK, WORLD_SIZE, DDP_JOB, DDP_GENERATION and DDP_COORDINATOR set).

--init url: init_process_group(init_method="ddp://"); --init store: store=CoordinatorStore().
The rank --fail-rank exits with code 3 at step --fail-at-step of the first attempt
(TORCHELASTIC_RESTART_COUNT 0). At the end every rank writes --result-dir/rank<R>.json.
"""
import argparse
import datetime
import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import ddp_coordinator.store  # registers ddp://


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--init", choices=["url", "store"], default="url")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--fail-at-step", type=int, default=-1)
    parser.add_argument("--fail-rank", type=int, default=1)
    parser.add_argument("--result-dir", required=True)
    args = parser.parse_args()

    timeout = datetime.timedelta(seconds=60)
    if args.init == "url":
        dist.init_process_group("gloo", init_method="ddp://", timeout=timeout)
    else:
        store = ddp_coordinator.store.CoordinatorStore(timeout=timeout)
        dist.init_process_group("gloo", store=store, rank=int(os.environ["RANK"]),
                                world_size=int(os.environ["WORLD_SIZE"]), timeout=timeout)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))

    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(args.steps):
        if step == args.fail_at_step and rank == args.fail_rank and restart == 0:
            print(f"rank {rank}: failing at step {step} as asked", flush=True)
            sys.exit(3)
        data = torch.Generator().manual_seed(step * world_size + rank)
        x = torch.randn(8, 4, generator=data)
        loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    # The store's own calls, through the default group's PrefixStore (C++ -> Python).
    group_store = dist.distributed_c10d._get_default_store()
    group_store.add("finished", 1)
    group_store.wait(["finished"])
    dist.barrier()

    digest = hashlib.sha256()
    for parameter in model.parameters():
        digest.update(parameter.detach().numpy().tobytes())
    result = {"rank": rank, "world_size": world_size, "restart": restart,
              "generation": int(os.environ.get("DDP_GENERATION", "0")),
              "checksum": digest.hexdigest()}
    with open(os.path.join(args.result_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
