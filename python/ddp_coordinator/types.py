"""Typed results of the coordinator's API: dataclasses filled from the generated messages.

Field names and meanings are those of proto/ddp/v1 (see its comments and docs/api.md);
enums are Python ``IntEnum``s built from the proto enums, so their members are the proto's.
"""
import dataclasses
import enum
import typing
from typing import Dict, List, Optional

from ddp_coordinator._proto import cluster_pb2, jobs_pb2, kv_pb2

# The proto enums as Python enums (names and numbers from the generated descriptors).
JobState = enum.IntEnum("JobState", dict(jobs_pb2.JobState.items()), module=__name__)
JobState.__doc__ = "A job's state: WAITING, STARTING, RUNNING, RESTARTING, SUCCEEDED, ..."
RestartCause = enum.IntEnum("RestartCause", dict(jobs_pb2.RestartCause.items()), module=__name__)
RestartCause.__doc__ = "Why a generation was stopped: WORKER_FAILURE, HANG, NODE_LOSS, ..."
SpeedSource = enum.IntEnum("SpeedSource", dict(jobs_pb2.SpeedSource.items()), module=__name__)
SpeedSource.__doc__ = ("What a rank's relative speed comes from: SPEED_SOURCE_STEP_TIME, "
                       "_STEP_RATE, _CPU_BUSY (a rank that reports nothing), _UNSPECIFIED")
JobEventType = enum.IntEnum("JobEventType", dict(jobs_pb2.JobEvent.Type.items()), module=__name__)
JobEventType.__doc__ = "The kind of a job event: JOB_CREATED, NODE_JOINED, ..."
EventType = enum.IntEnum("EventType", dict(kv_pb2.Event.Type.items()), module=__name__)
EventType.__doc__ = "The kind of a KV event: PUT or DELETE."
Role = enum.IntEnum("Role", dict(cluster_pb2.ClusterStatus.Role.items()), module=__name__)
Role.__doc__ = "A coordinator's role: SINGLE, LEADER or STANDBY."

FINISHED_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})


def _from_message(cls, message):
    """Fills dataclass ``cls`` from ``message`` field by field (same names). A nested
    message field typed Optional[...] is None when unset."""
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        if field.metadata.get("derived"):
            continue
        kind = hints[field.name]
        value = getattr(message, field.name)
        origin = typing.get_origin(kind)
        args = typing.get_args(kind)
        if origin is typing.Union:  # Optional[Nested], or an optional scalar
            nested = args[0]
            if not message.HasField(field.name):
                values[field.name] = None
            elif dataclasses.is_dataclass(nested):
                values[field.name] = _from_message(nested, value)
            else:
                values[field.name] = value
        elif origin in (list, List):
            item = args[0]
            values[field.name] = ([_from_message(item, v) for v in value]
                                  if dataclasses.is_dataclass(item) else list(value))
        elif origin in (dict, Dict):
            values[field.name] = dict(value)
        elif dataclasses.is_dataclass(kind):
            values[field.name] = _from_message(kind, value)
        elif isinstance(kind, type) and issubclass(kind, enum.IntEnum):
            values[field.name] = kind(value)
        else:
            values[field.name] = value
    return cls(**values)


@dataclasses.dataclass(frozen=True)
class JobSettings:
    """A job's settings; 0 takes the coordinator's default (min_nodes 1, max_nodes =
    min_nodes, nproc_per_node 1, join 600 s, last call 30 s, heartbeat 500 ms / 3 s,
    shutdown 30 s; max_restarts 0: no restart)."""
    min_nodes: int = 0
    max_nodes: int = 0
    nproc_per_node: int = 0
    max_restarts: int = 0
    join_timeout_ms: int = 0
    last_call_timeout_ms: int = 0
    heartbeat_interval_ms: int = 0
    heartbeat_timeout_ms: int = 0
    shutdown_timeout_ms: int = 0
    # The straggler exclusion policy: 0 off; else 1.1-100 (after 0: 60 s).
    straggler_exclude_factor: float = 0.0
    straggler_exclude_after_ms: int = 0
    # A hang: every member's workers without CPU or I/O this long. None: the
    # coordinator's 10 s; 0: off; else at least 2,000.
    hang_timeout_ms: Optional[int] = None

    def to_proto(self):
        fields = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        return jobs_pb2.JobSettings(**fields)


@dataclasses.dataclass(frozen=True)
class Failure:
    """One worker failure (exit, signal or hang), or why a job failed without one."""
    node_id: str
    generation: int
    local_rank: int
    global_rank: int
    exit_code: int
    signal: int
    message: str
    time_unix_ms: int
    hang: bool
    pid: int
    process_stopped: bool


@dataclasses.dataclass(frozen=True)
class WorkerProgress:
    """What a worker last reported through :func:`ddp_coordinator.worker.report_progress`:
    its step, steps per second (0 until two reports), how long ago (ms), and its metrics;
    for the running generation's members, its speed relative to the job's median and
    whether that makes it a straggler (a quarter or more slower), and from what
    (``speed_source``). A rank that reports nothing is listed with ``cpu_busy``, the share
    of one core its agent saw it use over the last 5 s (no step, rate nor metrics)."""
    local_rank: int
    global_rank: int
    generation: int
    step: int
    steps_per_second: float
    age_ms: int
    metrics: Dict[str, float]
    relative_speed: float
    straggler: bool
    # Its last report_checkpoint: Unix ms (0: none) and step.
    checkpoint_unix_ms: int = 0
    checkpoint_step: int = 0
    speed_source: SpeedSource = SpeedSource.SPEED_SOURCE_UNSPECIFIED
    cpu_busy: float = 0.0


@dataclasses.dataclass(frozen=True)
class GenerationTime:
    """One generation's time (ms) and the downtime before it: ``detection_ms`` (the previous
    generation's first failure, a hang's last activity, to its restart) and ``rendezvous_ms``
    (the restart, or the job's creation, to this start); ``training_ms`` it ran, of which
    ``work_lost_ms`` since its last checkpoint (report_checkpoint) was lost. Generation 0:
    the downtime after the last generation (docs/operations.md "Lost time")."""
    generation: int
    started_unix_ms: int
    ended_unix_ms: int
    ended_by: str
    detection_ms: int
    rendezvous_ms: int
    training_ms: int
    work_lost_ms: int
    last_checkpoint_unix_ms: int
    last_checkpoint_step: int
    first_failure_unix_ms: int


@dataclasses.dataclass(frozen=True)
class JobTime:
    """Where a job's time went, as the coordinator counts it: per generation (the newest 64),
    and the totals: training (less the work lost since checkpoints) and the three kinds of
    lost time."""
    generations: List[GenerationTime]
    generations_omitted: int
    training_ms: int
    detection_ms: int
    rendezvous_ms: int
    work_lost_ms: int


@dataclasses.dataclass(frozen=True)
class Member:
    """A registered node: a member of the generation, or a spare (group_rank -1)."""
    node_id: str
    incarnation: int
    address: str
    nproc: int
    group_rank: int
    global_rank_offset: int
    heartbeat_age_ms: int
    connected: bool
    progress: List[WorkerProgress]
    # Set while the node drains: when it leaves at the latest (0: not draining), and why.
    leaves_at_unix_ms: int = 0
    drain_reason: str = ""


@dataclasses.dataclass(frozen=True)
class Job:
    """A job (one run of a job id) as the coordinator sees it."""
    job_id: str
    settings: JobSettings
    state: JobState
    generation: int
    restart_count: int
    members: List[Member]
    spares: List[Member]
    excluded_nodes: List[str]
    failures: List[Failure]
    root_cause: Optional[Failure]
    message: str
    created_unix_ms: int
    last_event_index: int
    first_event_index: int
    member_count: int
    registered_nodes: int
    world_size: int
    run: int
    finished_unix_ms: int
    # The job's bearer token, only in the result of create and issue_token with
    # authorization on; '' otherwise.
    token: str
    # Where its time went (get of the current run; None in list and past runs).
    time: Optional[JobTime] = None

    @property
    def finished(self):
        """True in SUCCEEDED, FAILED or CANCELLED."""
        return self.state in FINISHED_STATES


@dataclasses.dataclass(frozen=True)
class JobEvent:
    """One event of a job's history; ``index`` is monotonic per job from 1."""
    job_id: str
    index: int
    time_unix_ms: int
    type: JobEventType
    node_id: str
    generation: int
    message: str
    failure: Optional[Failure]
    restart_cause: RestartCause


@dataclasses.dataclass(frozen=True)
class KeyValue:
    """A key and its value with their revisions (``lease`` 0: none)."""
    namespace: str
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int


@dataclasses.dataclass(frozen=True)
class KvEvent:
    """A change seen by a watch: PUT (``kv`` holds the new value) or DELETE (``kv`` holds
    the key, namespace and the deleting revision as mod_revision)."""
    type: EventType
    kv: KeyValue


@dataclasses.dataclass(frozen=True)
class PutResult:
    """The revision of a put, and the previous key-value when asked for and present."""
    revision: int
    previous: Optional[KeyValue]


@dataclasses.dataclass(frozen=True)
class RangeResult:
    """A page of keys in key order; ``more``: call again from ``next_start_after``."""
    kvs: List[KeyValue]
    more: bool
    next_start_after: bytes
    revision: int


@dataclasses.dataclass(frozen=True)
class CompareAndSetResult:
    """TCPStore's compare_set: the value after the call, and whether it was swapped."""
    value: bytes
    swapped: bool
    revision: int


@dataclasses.dataclass(frozen=True)
class Lease:
    """A lease: keys attached to it are deleted when it expires or is revoked."""
    lease: int
    ttl_ms: int


@dataclasses.dataclass(frozen=True)
class KvStatus:
    """The KV store's counters."""
    revision: int
    compacted_revision: int
    keys: int
    leases: int
    watchers: int
    version: str


@dataclasses.dataclass(frozen=True)
class CoordinatorInfo:
    """One coordinator's addresses (``grpc_address`` as clients dial it) and name."""
    grpc_address: str
    http_address: str
    http_scheme: str
    name: str


@dataclasses.dataclass(frozen=True)
class EtcdEndpointStatus:
    """One etcd member of the coordinator's store."""
    endpoint: str
    healthy: bool
    error: str
    version: str
    is_raft_leader: bool
    db_size_bytes: int
    raft_term: int


@dataclasses.dataclass(frozen=True)
class ClusterStatus:
    """The answering coordinator, its role, the leader it sees and the store under it."""
    store: str
    self: Optional[CoordinatorInfo]
    role: Role
    leader: Optional[CoordinatorInfo]
    etcd_endpoints: List[EtcdEndpointStatus]
    leader_lease_ms: int


def job_from_proto(message):
    return _from_message(Job, message)


def job_event_from_proto(message):
    return _from_message(JobEvent, message)


def key_value_from_proto(message):
    return _from_message(KeyValue, message)


def from_proto(cls, message):
    """Public form of the converter, for any dataclass of this module."""
    return _from_message(cls, message)
