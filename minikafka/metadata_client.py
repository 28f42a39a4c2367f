"""One Metadata request to one broker, as a Kafka client's first request: what that broker tells clients about
the cluster (its brokers and its controller), independent of any client library's cache."""
from __future__ import annotations

import itertools
import struct
import time
from dataclasses import dataclass

from minikafka.control_client import ControlClient
from minikafka.handle_security import ClientSecurity
from minikafka.protocol.framing import FrameDecoder
from minikafka.protocol.schema_loading import quiet_schema_loading

with quiet_schema_loading():
    from kafka.protocol.metadata import MetadataRequest

    from minikafka.protocol.codec import SCHEMAS

DEFAULT_TIMEOUT_S = 5.0
METADATA_VERSION = 1  # the first version with controller_id
RECEIVE_BYTES = 1 << 16
MAX_RESPONSE_BYTES = 1 << 24
_correlation = itertools.count(1)


@dataclass(frozen=True)
class ClusterView:
    controller_id: int  # -1 when the broker knows of no controller
    broker_ids: list[int]


def cluster_view(address: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                 security: ClientSecurity | None = None) -> ClusterView:
    """The controller and brokers the broker at `address` names in a Metadata response (OSError when it cannot
    be asked), over TLS and SASL as `security` says (a secured handle's admin)."""
    correlation_id = next(_correlation) & 0x7FFFFFFF
    request = MetadataRequest[METADATA_VERSION](topics=[])
    request.with_header(correlation_id=correlation_id, client_id="minikafka-metadata")
    deadline = time.monotonic() + timeout_s
    decoder = FrameDecoder(MAX_RESPONSE_BYTES)
    with ControlClient(address, timeout_s, "minikafka-metadata", security).connect(deadline) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        frames: list[bytes] = []
        while not frames:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no Metadata response from {address} in time")
            sock.settimeout(remaining)
            chunk = sock.recv(RECEIVE_BYTES)
            if not chunk:
                raise ConnectionError(f"{address} closed the connection before answering Metadata")
            frames = decoder.feed(chunk)
    (got,) = struct.unpack_from(">i", frames[0])
    if got != correlation_id:
        raise ConnectionError(f"Metadata response for request {got}, expected {correlation_id}")
    schema = SCHEMAS[request.API_KEY]
    response = schema.response.decode(frames[0][4 + schema.response_header_version(METADATA_VERSION):],
                                      version=METADATA_VERSION)
    return ClusterView(controller_id=response.controller_id, broker_ids=sorted(b.node_id for b in response.brokers))
