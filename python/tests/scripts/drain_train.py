"""A training loop for the drain and preemption tests: each step (--step-s) it reports its
progress; once ddp_coordinator.preemption_pending() it writes its checkpoint
(CHECKPOINT_DIR/rank<R>-gen<G>, holding the step) and calls ready_to_leave(). With
--slow-node N, the workers of group rank N take 50 % longer per step and report it as
step_time_s (a straggler). Runs until the file named by --stop exists."""
import argparse
import os
import time

import ddp_coordinator
from ddp_coordinator import worker

parser = argparse.ArgumentParser()
parser.add_argument("--stop", required=True)
parser.add_argument("--checkpoint-dir", required=True)
parser.add_argument("--step-s", type=float, default=0.1)
parser.add_argument("--slow-node", type=int, default=-1)
args = parser.parse_args()
me = worker.info()
step_s = args.step_s * (1.5 if me.group_rank == args.slow_node else 1.0)
ready = False
step = 0
while not os.path.exists(args.stop):
    if not ready and ddp_coordinator.preemption_pending():
        notice = ddp_coordinator.preemption_notice()
        path = os.path.join(args.checkpoint_dir, f"rank{me.rank}-gen{me.generation}")
        with open(path + ".tmp", "w") as f:
            f.write(f"{step} {notice.node_id}\n")
        os.replace(path + ".tmp", path)
        ddp_coordinator.ready_to_leave()
        ready = True
    worker.report_progress(step, step_time_s=step_s)
    step += 1
    time.sleep(step_s)
