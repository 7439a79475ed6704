"""Errors of the coordinator's API, as exceptions that carry the gRPC status code.

Every failed call raises a :class:`CoordinatorError` (or the subclass for its code) with
``code`` (a :class:`grpc.StatusCode`) and ``message`` (the coordinator's, which names the
offending value and the limit). The codes keep their retry meaning:

- ``UNAVAILABLE``: retry the call (the client already did, across its endpoints);
- ``ABORTED``: restart the sequence (stale generation);
- ``FAILED_PRECONDITION``: fix the state first (a Put condition, a finished job);
- ``INVALID_ARGUMENT``: never retry as is;
- ``RESOURCE_EXHAUSTED``: over a limit.
"""
import grpc


class CoordinatorError(Exception):
    """A call to the coordinator failed; ``code`` and ``message`` are the gRPC status."""

    def __init__(self, code, message, endpoint=""):
        self.code = code
        self.message = message
        self.endpoint = endpoint
        where = f" (coordinator {endpoint})" if endpoint else ""
        super().__init__(f"{code.name}: {message}{where}")


class InvalidArgumentError(CoordinatorError):
    """INVALID_ARGUMENT: a bad id, namespace, key or setting; never retry as is."""


class NotFoundError(CoordinatorError):
    """NOT_FOUND: no such job, node, run or lease."""


class AlreadyExistsError(CoordinatorError):
    """ALREADY_EXISTS: CreateJob of an existing job with other settings."""


class PermissionDeniedError(CoordinatorError):
    """PERMISSION_DENIED: the token may not act on this job, namespace or lease."""


class UnauthenticatedError(CoordinatorError):
    """UNAUTHENTICATED: no token, or an unknown one, for a coordinator with authorization."""


class FailedPreconditionError(CoordinatorError):
    """FAILED_PRECONDITION: a condition did not hold (compare-and-set, a finished job)."""


class AbortedError(CoordinatorError):
    """ABORTED: the sequence is stale (e.g. an older generation); start it again."""


class OutOfRangeError(CoordinatorError):
    """OUT_OF_RANGE: a watch from a revision or event index no longer retained."""


class ResourceExhaustedError(CoordinatorError):
    """RESOURCE_EXHAUSTED: over a configured limit (sizes, counts, watchers)."""


class DeadlineExceededError(CoordinatorError):
    """DEADLINE_EXCEEDED: the call's timeout passed (also a KV wait that timed out)."""


class UnavailableError(CoordinatorError):
    """UNAVAILABLE: no coordinator answered, or it is shutting down; retry later."""


class CancelledError(CoordinatorError):
    """CANCELLED: the call was cancelled (a watch closed by its caller)."""


_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.ABORTED: AbortedError,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRangeError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.CANCELLED: CancelledError,
}


def error_for(code, message, endpoint=""):
    """The exception for a gRPC status: the subclass of its code, else CoordinatorError."""
    return _BY_CODE.get(code, CoordinatorError)(code, message, endpoint)


def from_rpc_error(error, endpoint=""):
    """The exception for a :class:`grpc.RpcError` raised by a stub."""
    return error_for(error.code(), error.details() or "", endpoint)
