"""A training loop that reports its progress each step (0.1 s) through
ddp_coordinator.report_progress until the file named by --stop exists; with
--stall-at N, rank 1 stops reporting at step N and sleeps (a hang in an
unmodified-looking loop: no heartbeat file in the script); with --slow-rank R, rank R
takes 50 % longer per step (a straggler)."""
import argparse
import os
import time

from ddp_coordinator import worker

parser = argparse.ArgumentParser()
parser.add_argument("--stop", required=True)
parser.add_argument("--stall-at", type=int, default=-1)
parser.add_argument("--step-s", type=float, default=0.1)
parser.add_argument("--slow-rank", type=int, default=-1, help="sleeps 50 %% longer per step")
args = parser.parse_args()
rank = int(os.environ["RANK"])
step = 0
while not os.path.exists(args.stop):
    if rank == 1 and step == args.stall_at and os.environ.get("TORCHELASTIC_RESTART_COUNT") == "0":
        time.sleep(3600)
    worker.report_progress(step, loss=1.0 / (step + 1), rank=rank)
    step += 1
    time.sleep(args.step_s * (1.5 if rank == args.slow_rank else 1.0))
