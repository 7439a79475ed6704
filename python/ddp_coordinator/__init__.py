"""ddp_coordinator: Python for the ddp-coordinator service.

- :class:`Client` — the scheduler's client: jobs, the key-value store, the cluster;
- :mod:`ddp_coordinator.worker` — the training script's side: who am I, is my generation
  current, the heartbeat, the job's key namespace, the preemption notice
  (:func:`preemption_pending`, :func:`ready_to_leave`, also here at the top);
- :mod:`ddp_coordinator.errors` — exceptions carrying the gRPC code and message;
- :mod:`ddp_coordinator.store` — :class:`CoordinatorStore`, a c10d Store over the
  coordinator's KV, and the ``ddp://`` init_method (needs torch);
- :mod:`ddp_coordinator.torchrun` — ``torchrun --rdzv-backend ddp`` (imports torch);
- :mod:`ddp_coordinator.launch`, :mod:`ddp_coordinator.comm` — detectron2's ``launch()`` and
  ``comm`` helpers, supervised by ddp-client (import torch);
- :mod:`ddp_coordinator.recovery` — ``run(train_loop, state)``: survivors of a failure keep
  their process under ``ddp-client --in-process-restart`` (imports torch when run).

The protobuf and gRPC modules are generated from proto/ddp/v1 into
``ddp_coordinator._proto`` when the package is built (pip, Bazel); docs/python.md shows
examples.
"""
from ddp_coordinator import worker
from ddp_coordinator.worker import preemption_notice, preemption_pending, ready_to_leave

try:  # written by setup.py: common/version.h's release and the hash of the sources
    from ddp_coordinator._version import __version__
except ImportError:  # imported from the source tree or Bazel's build, not installed
    __version__ = "0+source"

_CLIENT_NAMES = {"Client", "Jobs", "KeyValueNamespace", "JobWatch", "KvWatch"}
_TYPE_NAMES = {"ClusterStatus", "CompareAndSetResult", "CoordinatorInfo", "EtcdEndpointStatus",
               "EventType", "Failure", "GenerationTime", "Job", "JobEvent", "JobEventType",
               "JobSettings", "JobState", "JobTime", "KeyValue", "KvEvent", "KvStatus", "Lease",
               "Member", "PutResult", "RangeResult", "RestartCause", "Role", "SpeedSource",
               "WorkerProgress"}
_ERROR_NAMES = {"CoordinatorError", "AbortedError", "AlreadyExistsError", "CancelledError",
                "DeadlineExceededError", "FailedPreconditionError", "InvalidArgumentError",
                "NotFoundError", "OutOfRangeError", "PermissionDeniedError",
                "ResourceExhaustedError", "UnauthenticatedError", "UnavailableError"}

# The c10d store (ddp_coordinator.store) imports torch: loaded on first use, and left out of
# __all__ so that `from ddp_coordinator import *` works without torch.
_STORE_NAMES = {"CoordinatorStore", "StoreTimeoutError"}


def __getattr__(name):
    # The client, its types and errors load grpc and the generated modules on first use,
    # so a worker that only reads its environment imports neither.
    if name in _ERROR_NAMES:
        from ddp_coordinator import errors
        return getattr(errors, name)
    if name in _CLIENT_NAMES:
        from ddp_coordinator import client
        return getattr(client, name)
    if name in _TYPE_NAMES:
        from ddp_coordinator import types
        return getattr(types, name)
    if name in _STORE_NAMES:
        from ddp_coordinator import store
        return getattr(store, name)
    raise AttributeError(f"module 'ddp_coordinator' has no attribute {name!r}")


__all__ = sorted(_CLIENT_NAMES | _TYPE_NAMES | _ERROR_NAMES |
                 {"worker", "preemption_notice", "preemption_pending", "ready_to_leave"})
