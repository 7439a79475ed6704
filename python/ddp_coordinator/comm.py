"""detectron2's ``comm`` helpers (``detectron2.utils.comm``) over torch.distributed: who am I,
barriers, and collectives of Python objects and of metric dicts. They work in the workers
:func:`ddp_coordinator.launch.launch` starts (gloo on CPU, NCCL on GPUs), and answer as a
single process (rank 0 of 1) where no process group exists.

    from ddp_coordinator import comm

    if comm.is_main_process():
        save_checkpoint()
    comm.synchronize()
    losses = comm.reduce_dict({"loss": loss.detach()})   # averaged, on rank 0
    everyone = comm.all_gather(local_stats)              # a list, one item per rank
"""
import functools
import secrets

import torch
import torch.distributed as dist

# This machine's workers (launch() makes it with create_local_process_group).
_LOCAL_PROCESS_GROUP = None
_MISSING_LOCAL_GROUP = ("the local process group is not created: start the workers with "
                        "ddp_coordinator.launch.launch(), or call "
                        "comm.create_local_process_group(num_workers_per_machine)")


def _distributed():
    return dist.is_available() and dist.is_initialized()


def get_world_size() -> int:
    """Processes in the job (1 without a process group)."""
    return dist.get_world_size() if _distributed() else 1


def get_rank() -> int:
    """This process's global rank (0 without a process group)."""
    return dist.get_rank() if _distributed() else 0


@functools.lru_cache()
def create_local_process_group(num_workers_per_machine: int) -> None:
    """Makes the group of this machine's workers: ranks ``m * n .. m * n + n - 1`` for
    machine ``m`` (detectron2's numbering). Every process of the job must call it (each
    group is made by all); once per process (a repeated call with the same count does
    nothing)."""
    global _LOCAL_PROCESS_GROUP
    if _LOCAL_PROCESS_GROUP is not None:
        raise RuntimeError("the local process group exists already")
    world_size = get_world_size()
    if num_workers_per_machine < 1 or world_size % num_workers_per_machine:
        raise ValueError(f"num_workers_per_machine={num_workers_per_machine} does not divide "
                         f"the world size {world_size}")
    machine = get_rank() // num_workers_per_machine
    for m in range(world_size // num_workers_per_machine):
        ranks = list(range(m * num_workers_per_machine, (m + 1) * num_workers_per_machine))
        group = dist.new_group(ranks)
        if m == machine:
            _LOCAL_PROCESS_GROUP = group


def get_local_process_group():
    """The group of this machine's workers."""
    if _LOCAL_PROCESS_GROUP is None:
        raise RuntimeError(_MISSING_LOCAL_GROUP)
    return _LOCAL_PROCESS_GROUP


def get_local_rank() -> int:
    """This process's rank among its machine's workers (0 without a process group)."""
    if not _distributed():
        return 0
    return dist.get_rank(group=get_local_process_group())


def get_local_size() -> int:
    """Workers on this machine (1 without a process group)."""
    if not _distributed():
        return 1
    return dist.get_world_size(group=get_local_process_group())


def is_main_process() -> bool:
    """True for global rank 0 (and for a single process)."""
    return get_rank() == 0


def synchronize() -> None:
    """A barrier of every process of the job; nothing for a single process."""
    if get_world_size() == 1:
        return
    if dist.get_backend() == dist.Backend.NCCL:
        # The barrier's tensor goes on this process's own GPU, not on GPU 0.
        dist.barrier(device_ids=[torch.cuda.current_device()])
    else:
        dist.barrier()


@functools.lru_cache()
def _global_gloo_group():
    """A gloo group of every process: Python objects travel on CPU, whatever the backend."""
    if dist.get_backend() == dist.Backend.NCCL:
        return dist.new_group(backend="gloo")
    return dist.group.WORLD


def all_gather(data, group=None) -> list:
    """``data`` (any picklable object) of every process of ``group`` (default: all), in
    rank order."""
    if get_world_size() == 1:
        return [data]
    if group is None:
        group = _global_gloo_group()
    size = dist.get_world_size(group=group)
    if size == 1:
        return [data]
    output = [None] * size
    dist.all_gather_object(output, data, group=group)
    return output


def gather(data, dst=0, group=None) -> list:
    """``data`` of every process of ``group``, in rank order, on global rank ``dst``; an
    empty list on the others."""
    if get_world_size() == 1:
        return [data]
    if group is None:
        group = _global_gloo_group()
    size = dist.get_world_size(group=group)
    if size == 1:
        return [data]
    if get_rank() == dst:
        output = [None] * size
        dist.gather_object(data, output, dst=dst, group=group)
        return output
    dist.gather_object(data, None, dst=dst, group=group)
    return []


def shared_random_seed() -> int:
    """A random integer in [0, 2**31), the same on every process (rank 0's); a new one
    per call. Use it to seed what must agree across workers, e.g. a sampler's shuffling."""
    return all_gather(secrets.randbelow(2 ** 31))[0]


def reduce_dict(input_dict: dict, average: bool = True) -> dict:
    """Sums (``average``: averages) each scalar tensor of ``input_dict`` over every process;
    the result is meaningful on rank 0 only (detectron2's, for logging losses). Every
    process must pass the same keys."""
    world_size = get_world_size()
    if world_size < 2:
        return input_dict
    with torch.no_grad():
        names = sorted(input_dict)
        values = torch.stack([torch.as_tensor(input_dict[k]) for k in names])
        dist.reduce(values, dst=0)
        if dist.get_rank() == 0 and average:
            values /= world_size
        return dict(zip(names, values))
