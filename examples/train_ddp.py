#!/usr/bin/env python3
"""A small PyTorch DDP training job that runs unchanged under torchrun and ddp-client.

It reads torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT,
TORCHELASTIC_RESTART_COUNT), trains a tiny regression model with DistributedDataParallel
over gloo (CPU) or NCCL (GPU), checkpoints every few steps from rank 0, and resumes from the
checkpoint after a group restart. Between steps it touches DDP_HEARTBEAT_FILE when the agent
provides one, so a hung worker is detected; before writing a checkpoint it checks that its
generation is still current (ddp_coordinator.worker.generation_is_current: DDP_LEASE_FILE
under ddp-client).

Fault injection for demos and tests (all optional):
  --fail-at-step K      the worker with global rank --fail-rank exits with --fail-exit-code
                        at step K, but only in restart --fail-on-restart (default 0), so the
                        restarted group finishes.
  --hang-at-step K      the worker with global rank --fail-rank stops touching its heartbeat
                        file and sleeps at step K (restart --fail-on-restart only).
At the end, every rank writes its final parameters' checksum to --result-dir/rank<R>.txt.
"""
import argparse
import datetime
import hashlib
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

# ddp-client puts the package on its workers' PYTHONPATH; tools/setup.sh installs it for
# /usr/bin/python3 (plain torchrun). Outside ddp-client it answers True (no lease file).
from ddp_coordinator.worker import generation_is_current


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--checkpoint-every", type=int, default=5)
    parser.add_argument("--checkpoint-dir", default=os.environ.get("TMPDIR", "/tmp"))
    parser.add_argument("--result-dir", default="")
    parser.add_argument("--step-seconds", type=float, default=0.02,
                        help="extra time per step, to make a run last long enough to observe")
    parser.add_argument("--fail-at-step", type=int, default=-1)
    parser.add_argument("--hang-at-step", type=int, default=-1)
    parser.add_argument("--fail-rank", type=int, default=1)
    parser.add_argument("--fail-exit-code", type=int, default=1)
    parser.add_argument("--fail-on-restart", type=int, default=0)
    parser.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
    parser.add_argument("--collective-timeout", type=float, default=0,
                        help="seconds a collective may wait (0: torch's default, 30 min)")
    # torch.distributed.launch passes --local-rank / --local_rank unless --use-env.
    parser.add_argument("--local-rank", "--local_rank", type=int, default=None)
    return parser.parse_args()


def touch(path):
    if path:
        with open(path, "a"):
            os.utime(path, None)


def checksum(model):
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().cpu().numpy().tobytes())
    return digest.hexdigest()


def main():
    args = parse_args()
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", args.local_rank or 0))
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    heartbeat_file = os.environ.get("DDP_HEARTBEAT_FILE", "")
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none")

    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    device = torch.device(f"cuda:{local_rank}" if backend == "nccl" else "cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)

    touch(heartbeat_file)
    if args.collective_timeout > 0:
        dist.init_process_group(backend=backend,
                                timeout=datetime.timedelta(seconds=args.collective_timeout))
    else:
        dist.init_process_group(backend=backend)
    print(f"rank {rank}/{world_size} local_rank {local_rank} restart {restart} "
          f"generation {os.environ.get('DDP_GENERATION', '-')} backend {backend}", flush=True)

    torch.manual_seed(0)  # identical initial weights everywhere
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    ckpt_path = os.path.join(args.checkpoint_dir, f"ddp-example-{run_id}.pt")
    start_step = 0
    if os.path.exists(ckpt_path):
        state = torch.load(ckpt_path, map_location="cpu")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_step = state["step"]
        print(f"rank {rank} resumed from step {start_step}", flush=True)

    ddp_model = DistributedDataParallel(model, device_ids=[local_rank] if backend == "nccl" else None)
    data_gen = torch.Generator().manual_seed(1000 + rank)
    target_w = torch.arange(8, dtype=torch.float32).unsqueeze(1) / 8

    for step in range(start_step, args.steps):
        if restart == args.fail_on_restart and rank == args.fail_rank:
            if step == args.fail_at_step:
                print(f"rank {rank} failing on purpose at step {step}", flush=True)
                sys.stderr.flush()
                # At once, as a crash would: a normal interpreter shutdown tears gloo down
                # slowly, and the peers' knock-on exits could then be seen first.
                os._exit(args.fail_exit_code)
            if step == args.hang_at_step:
                print(f"rank {rank} hanging on purpose at step {step}", flush=True)
                while True:
                    time.sleep(3600)
        # Progress at the start of each step too: peers blocked in this step's all-reduce
        # by a hung rank have touched it later than the hung rank, so the agent blames
        # the right one.
        touch(heartbeat_file)
        x = torch.randn(32, 8, generator=data_gen).to(device)
        y = x @ target_w.to(device)
        loss = torch.nn.functional.mse_loss(ddp_model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        touch(heartbeat_file)
        if args.step_seconds > 0:
            time.sleep(args.step_seconds)
        if (step + 1) % args.checkpoint_every == 0:
            if rank == 0 and generation_is_current():
                tmp = ckpt_path + ".tmp"
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "step": step + 1}, tmp)
                os.replace(tmp, ckpt_path)
            elif rank == 0:
                print(f"rank 0 skips the checkpoint of step {step + 1}: generation "
                      f"{os.environ.get('DDP_GENERATION')} is no longer current", flush=True)
            dist.barrier()
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.5f}", flush=True)

    digest = checksum(model)
    if args.result_dir:
        os.makedirs(args.result_dir, exist_ok=True)
        with open(os.path.join(args.result_dir, f"rank{rank}.txt"), "w") as out:
            json.dump({"rank": rank, "world_size": world_size, "restart": restart,
                       "checksum": digest, "steps": args.steps}, out)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank} done, params sha256 {digest[:16]}", flush=True)


if __name__ == "__main__":
    main()
