"""Channels to the coordinators of one deployment: endpoint lists, leader redirects, TLS
and the bearer token, the same as ddpctl and ddp-client (common/coordinator_endpoints.cc).

A standby coordinator ends every call (but GetClusterStatus) with UNAVAILABLE and names the
leader in the trailing metadata ``ddp-leader``: the call goes there at once. Without a hint
(the coordinator is down, or no leader is elected yet) it goes to the next endpoint of the
list. A named leader that failed is not followed again until the list went round once.
"""
import os
import threading
import time

import grpc

from ddp_coordinator import errors

DEFAULT_ENDPOINT = "localhost:29400"
LEADER_METADATA = "ddp-leader"
# The coordinator accepts values up to 256 MiB and caps its messages at 1 GiB.
_MAX_MESSAGE_BYTES = 1 << 30


DEFAULT_PORT = 29400
_SCHEMES = ("grpc://", "http://")


def _one_endpoint(entry, value):
    """HOST, HOST:PORT, [IPV6][:PORT], optionally grpc:// or http://: as ddpctl and ddp-client
    read it (common/endpoint.h ParseCoordinatorList); the port defaults to 29400."""
    for scheme in _SCHEMES:
        if entry.startswith(scheme):
            entry = entry[len(scheme):]
            break
    if "://" in entry:
        raise ValueError(
            f"coordinator endpoints {value!r}: scheme of {entry!r} is not one of grpc://, http://"
            " (TLS comes from DDP_TLS_CA, not the address)")
    entry = entry[:-1] if entry.endswith("/") else entry
    colon, bracket = entry.rfind(":"), entry.rfind("]")
    has_port = colon >= 0 and (bracket < 0 or colon > bracket)
    return entry if has_port or not entry else f"{entry}:{DEFAULT_PORT}"


def parse_endpoints(value):
    """``"a, b:1"`` -> ``["a:29400", "b:1"]``; ValueError when empty or a scheme is not grpc://
    or http://."""
    if isinstance(value, (list, tuple)):
        endpoints = [str(e).strip() for e in value]
    else:
        endpoints = [e.strip() for e in str(value).split(",")]
    if not endpoints or any(not e for e in endpoints):
        raise ValueError(f"coordinator endpoints {value!r}: expected HOST[:PORT][,HOST[:PORT]...]")
    return [_one_endpoint(e, value) for e in endpoints]


class Endpoints:
    """Which coordinator of the list a call goes to next (not thread-safe; one per caller)."""

    def __init__(self, endpoints):
        self._endpoints = list(endpoints) or [DEFAULT_ENDPOINT]
        self._index = 0
        self._hinted = None
        self._failed_hint = ""

    @property
    def current(self):
        return self._hinted or self._endpoints[self._index]

    @property
    def all(self):
        return list(self._endpoints)

    def next(self, leader_hint=""):
        """After a call to ``current`` failed: to the named leader (True) or the next one."""
        if leader_hint and leader_hint != self.current and leader_hint != self._failed_hint:
            self._hinted = leader_hint
            return True
        if self._hinted:
            self._failed_hint, self._hinted = self._hinted, None
        self._index = (self._index + 1) % len(self._endpoints)
        if self._index == 0:
            self._failed_hint = ""
        return False


def leader_hint(error):
    """The leader a standby named in the trailing metadata of a failed call; '' if none."""
    try:
        trailers = error.trailing_metadata() or ()
    except Exception:  # a non-call RpcError carries no metadata
        return ""
    for key, value in trailers:
        if key == LEADER_METADATA:
            return value.decode() if isinstance(value, bytes) else value
    return ""


def _read(path):
    with open(path, "rb") as f:
        return f.read()


class Connection:
    """Stubs over cached channels to the coordinators, and calls with redirects and retries.

    Thread-safe: the endpoint choice is guarded by a lock; gRPC channels are thread-safe.
    """

    def __init__(self, coordinator=None, token=None, tls_ca=None, tls_cert=None, tls_key=None,
                 timeout=10.0, retry_rounds=2, retry_backoff=0.2):
        coordinator = coordinator or os.environ.get("DDP_COORDINATOR") or DEFAULT_ENDPOINT
        self._endpoints = Endpoints(parse_endpoints(coordinator))
        self.token = token if token is not None else os.environ.get("DDP_TOKEN", "")
        tls_ca = tls_ca or os.environ.get("DDP_TLS_CA")
        tls_cert = tls_cert or os.environ.get("DDP_TLS_CERT")
        tls_key = tls_key or os.environ.get("DDP_TLS_KEY")
        if (tls_cert or tls_key) and not tls_ca:
            raise ValueError("tls_cert/tls_key need tls_ca (DDP_TLS_CA): the CA that signed the "
                             "coordinator's certificate")
        if bool(tls_cert) != bool(tls_key):
            raise ValueError("tls_cert and tls_key go together (DDP_TLS_CERT, DDP_TLS_KEY)")
        self._credentials = None
        if tls_ca:
            self._credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(tls_ca),
                private_key=_read(tls_key) if tls_key else None,
                certificate_chain=_read(tls_cert) if tls_cert else None)
        self.timeout = timeout
        self._retry_rounds = retry_rounds
        self._retry_backoff = retry_backoff
        self._lock = threading.Lock()
        self._channels = {}

    @property
    def endpoints(self):
        return self._endpoints.all

    @property
    def current_endpoint(self):
        with self._lock:
            return self._endpoints.current

    def close(self):
        with self._lock:
            channels, self._channels = self._channels, {}
        for channel in channels.values():
            channel.close()

    def _channel(self, endpoint):
        with self._lock:
            channel = self._channels.get(endpoint)
            if channel is None:
                options = [("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
                           ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES)]
                if self._credentials is not None:
                    channel = grpc.secure_channel(endpoint, self._credentials, options)
                else:
                    channel = grpc.insecure_channel(endpoint, options)
                self._channels[endpoint] = channel
            return channel

    def metadata(self):
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()

    def _advance(self, failed_endpoint, hint):
        """Moves past a failed endpoint (unless another caller already did); True: at once."""
        with self._lock:
            if self._endpoints.current != failed_endpoint:
                return True
            return self._endpoints.next(hint)

    def call(self, stub_class, method, request, timeout=None):
        """One unary call; UNAVAILABLE follows redirects and goes round the list
        ``retry_rounds`` times (with backoff) before it is raised."""
        timeout = self.timeout if timeout is None else timeout
        attempts = max(1, self._retry_rounds * len(self._endpoints.all) + 1)
        last = None
        for attempt in range(attempts):
            endpoint = self.current_endpoint
            stub = stub_class(self._channel(endpoint))
            try:
                return getattr(stub, method)(request, timeout=timeout, metadata=self.metadata())
            except grpc.RpcError as error:
                last = errors.from_rpc_error(error, endpoint)
                if error.code() != grpc.StatusCode.UNAVAILABLE or attempt + 1 == attempts:
                    raise last from None
                if not self._advance(endpoint, leader_hint(error)):
                    time.sleep(min(self._retry_backoff * (attempt + 1), 2.0))
        raise last

    def stream(self, stub_class, method, request):
        """Starts a server stream on the current endpoint; returns (call, endpoint)."""
        endpoint = self.current_endpoint
        stub = stub_class(self._channel(endpoint))
        return getattr(stub, method)(request, metadata=self.metadata()), endpoint

    def stream_failed(self, endpoint, error):
        """After a stream on ``endpoint`` failed with UNAVAILABLE: pick the next endpoint;
        returns whether to reconnect at once (a named leader)."""
        return self._advance(endpoint, leader_hint(error))
