"""A detectron2-style training script (tools/train_net.py's shape): only its two import lines
differ from detectron2's. Started by test_launch_e2e.py as two "machines" of two processes.

Every rank appends one JSON line to OUTPUT/ranks.jsonl per successful run; with --fail-once
MARKER the last rank raises once (creating MARKER), so the group must be restarted.
"""
import argparse
import json
import os

import torch
from torch.nn.parallel import DistributedDataParallel

from ddp_coordinator import comm  # detectron2: from detectron2.utils import comm
from ddp_coordinator.launch import launch  # detectron2: from detectron2.engine import launch


def default_argument_parser():
    parser = argparse.ArgumentParser(description="detectron2-style training")
    parser.add_argument("--num-gpus", type=int, default=1, help="processes per machine")
    parser.add_argument("--num-machines", type=int, default=1)
    parser.add_argument("--machine-rank", type=int, default=0)
    parser.add_argument("--dist-url", default="auto")
    parser.add_argument("--output", required=True)
    parser.add_argument("--fail-once", default="", help="marker file of the injected failure")
    return parser


def main(args):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    if comm.get_world_size() > 1:
        model = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        optimizer.zero_grad()
        loss = model(torch.full((8, 4), float(comm.get_rank() + 1))).pow(2).mean()
        loss.backward()
        optimizer.step()
    losses = comm.reduce_dict({"loss": loss.detach()})
    seed = comm.shared_random_seed()
    if args.fail_once and comm.get_rank() == comm.get_world_size() - 1 and not os.path.exists(
            args.fail_once):
        open(args.fail_once, "w").close()
        raise RuntimeError("injected failure")
    everyone = comm.all_gather({"rank": comm.get_rank(), "local_rank": comm.get_local_rank()})
    gathered = comm.gather(comm.get_rank(), dst=0)
    record = {"rank": comm.get_rank(), "world_size": comm.get_world_size(),
              "local_rank": comm.get_local_rank(), "local_size": comm.get_local_size(),
              "machine_rank": args.machine_rank, "main": comm.is_main_process(),
              "seed": seed, "all_gather": everyone, "gather": gathered,
              "restart": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
              "loss": float(losses["loss"]) if comm.is_main_process() else None}
    comm.synchronize()
    with open(os.path.join(args.output, "ranks.jsonl"), "a") as f:
        f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    args = default_argument_parser().parse_args()
    launch(main, args.num_gpus, num_machines=args.num_machines, machine_rank=args.machine_rank,
           dist_url=args.dist_url, args=(args,))
