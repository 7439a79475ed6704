"""A loop that reports progress each 0.1 s and, at step 10, a checkpoint
(ddp_coordinator.worker.report_checkpoint); in the first generation rank 0 then fails
(exit 1) --fail-after seconds after that checkpoint. Later generations run until the file
named by --stop exists."""
import argparse
import os
import sys
import time

from ddp_coordinator import worker

parser = argparse.ArgumentParser()
parser.add_argument("--stop", required=True)
parser.add_argument("--fail-after", type=float, required=True)
args = parser.parse_args()
first_generation = os.environ.get("TORCHELASTIC_RESTART_COUNT") == "0"
rank = int(os.environ["RANK"])
checkpointed = None
step = 0
while not os.path.exists(args.stop):
    worker.report_progress(step)
    if step == 10:
        worker.report_checkpoint()
        checkpointed = time.time()
    if (first_generation and rank == 0 and checkpointed is not None
            and time.time() - checkpointed >= args.fail_after):
        print(f"failing {time.time() - checkpointed:.2f} s after the checkpoint", flush=True)
        sys.exit(1)
    step += 1
    time.sleep(0.1)
