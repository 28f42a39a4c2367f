"""Request recording: while a test records (control ops recording.start, recording.read, recording.stop), each
Kafka request the broker answers is kept, with what it asked and what was answered, in a bounded ring. Brokers run
as their own processes, so the record is kept here and read over the control API; with no recording active a
request costs one attribute test."""
from __future__ import annotations

import collections
import time
from typing import TYPE_CHECKING, Any

from minikafka.broker.faults.shaping import request_entries
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from minikafka.broker.metadata.metadata_cache import MetadataCache
    from minikafka.broker.network.request_channel import Request
    from minikafka.broker.replication.purgatory import Purgatory

DEFAULT_RECORDING_SIZE = 10_000
RECORDING_KEY = ("request-recording",)  # the purgatory key of what waits for the next recorded request
# The request fields an entry keeps, where a request has them, as the body names them.
RECORDED_FIELDS = ("acks", "group_id", "member_id", "generation_id", "transactional_id", "producer_id",
                   "producer_epoch", "isolation_level", "group_instance_id", "member_epoch")


class RequestRecorder:
    """The ring of recorded requests, shared by the recordings open on this broker."""

    def __init__(self, purgatory: Purgatory) -> None:
        self._purgatory = purgatory
        self._recordings: dict[int, int] = {}  # open recording id -> its ring size
        self._next_id = 1
        self._entries: collections.deque[dict[str, Any]] = collections.deque()
        self._sequence = 0  # of the last entry kept
        self._software: dict[int, tuple[str, str]] = {}  # connection id -> client software name and version

    @property
    def active(self) -> bool:
        return bool(self._recordings)

    def start(self, size: int | None) -> tuple[int, int]:
        """Open a recording keeping at most `size` entries; its id, and the sequence it reads after."""
        size = DEFAULT_RECORDING_SIZE if size is None else int(size)
        if size < 1:
            raise ValueError(f"a recording keeps at least 1 request, got {size}")
        recording_id, self._next_id = self._next_id, self._next_id + 1
        self._recordings[recording_id] = size
        self._entries = collections.deque(self._entries, maxlen=max(self._recordings.values()))
        return recording_id, self._sequence

    def stop(self, recording_id: int) -> None:
        self._recordings.pop(recording_id, None)
        if not self._recordings:
            self._entries.clear()
            self._software.clear()

    def read(self, after: int) -> list[dict[str, Any]]:
        """The entries kept with a sequence past `after`, oldest first."""
        return [entry for entry in self._entries if entry["sequence"] > after]

    @property
    def sequence(self) -> int:
        return self._sequence

    def begin(self, request: Request, topics: MetadataCache, connection_id: int, peer: str) -> dict[str, Any]:
        """What the request asks, taken before it is handled (a fault may prune its entries)."""
        header, body = request.header, request.body
        assert body is not None  # a Kafka API's request is decoded
        if header.api_key == ApiKey.API_VERSIONS and getattr(body, "client_software_name", None):
            self._software[connection_id] = (body.client_software_name, body.client_software_version)
        software = self._software.get(connection_id, (None, None))
        fields = {name: value for name in RECORDED_FIELDS if (value := getattr(body, name, None)) is not None}
        return {"time": time.time(), "connection": connection_id, "peer": peer, "client_id": header.client_id,
                "client_software_name": software[0], "client_software_version": software[1],
                "api": ApiKey(header.api_key).api_name, "api_key": int(header.api_key),
                "version": header.api_version,
                "partitions": [list(entry) for entry in request_entries(request, topics)], **fields}

    def finish(self, entry: dict[str, Any], response: Any, took_ms: float) -> None:
        """Keep the entry with the errors answered and how long the answer took; wake the waiting readers."""
        entry["errors"] = sorted({_error_name(code) for code in _error_codes(response) if code})
        entry["latency_ms"] = round(took_ms, 3)
        entry["answered"] = response is not None
        self._sequence += 1
        entry["sequence"] = self._sequence
        self._entries.append(entry)
        self._purgatory.check_and_complete(RECORDING_KEY)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def _error_codes(response: Any) -> list[int]:
    if response is None:
        return []
    codes: list[int] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for name, item in value.items():
                if name == "error_code" and isinstance(item, int):
                    codes.append(item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(response.to_dict())
    return codes
