# ddp-client --health-check builtin=gloo: a loopback all-reduce over gloo.
#
# Run by the agent as `PYTHON -c <this file> WORLD_SIZE PYTHON` (embedded in
# the agent: client/gloo_check_source.h; PYTHON again to name it as configured). Starts WORLD_SIZE processes on this host
# (fork), joins them in a gloo process group over the loopback interface
# (a FileStore in a temporary directory), all-reduces a small tensor and
# checks the sum. Exit 0: passed; anything else: failed, with the reason on
# stdout. The agent's timeout kills the whole process group.
import os
import sys
import tempfile

PYTHON = sys.argv[2] if len(sys.argv) > 2 else (sys.executable or "python3")

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except Exception as exc:  # ImportError, or a broken install
    print("builtin=gloo needs torch importable by %s: %s: %s"
          % (PYTHON, type(exc).__name__, exc))
    sys.exit(3)


def rank_main(rank, world_size, store_path):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"  # loopback only: the node's own stack
    dist.init_process_group("gloo", init_method="file://" + store_path, rank=rank,
                            world_size=world_size)
    tensor = torch.full((16,), float(rank + 1))
    dist.all_reduce(tensor)
    expected = world_size * (world_size + 1) / 2
    if not bool(torch.all(tensor == expected)):
        raise SystemExit("rank %d: all_reduce gave %s, expected %s everywhere"
                         % (rank, tensor.tolist()[:4], expected))
    dist.barrier()
    dist.destroy_process_group()


def main():
    world_size = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    with tempfile.TemporaryDirectory(prefix="ddp-gloo-check-") as tmp:
        try:
            mp.start_processes(rank_main, args=(world_size, os.path.join(tmp, "store")),
                               nprocs=world_size, join=True, start_method="fork")
        except Exception as exc:
            print("gloo all_reduce of %d ranks on loopback failed: %s"
                  % (world_size, str(exc).strip()[-2000:]))
            sys.exit(1)
    print("gloo all_reduce of %d ranks on loopback: sum correct (torch %s, %s)"
          % (world_size, torch.__version__, PYTHON))


if __name__ == "__main__":
    main()
