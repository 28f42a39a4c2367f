"""Seeing what clients did: `with broker.recording() as rec:` (or `cluster.recording()`) records every Kafka request
the brokers answer while it is open. The record is kept in each broker process (control ops recording.*) and read
here; `wait_for` is answered by the broker when a request is recorded, not polled. `wait_for` waits for a request
recorded after it is called (so two calls return two requests, and a request from before an action is not taken
for one the action caused); `earlier=True` takes any request the recording holds, the oldest first.

Each entry is a dict: time (epoch seconds), node (the broker's control address), connection, peer, client_id,
client_software_name and client_software_version (from the connection's ApiVersions v3+), api (Kafka's name),
api_key, version, partitions ([topic, partition, offset] per entry, partition and offset null where the request has
none), the request fields it has of acks, group_id, member_id, generation_id, member_epoch, group_instance_id,
transactional_id, producer_id, producer_epoch, isolation_level; errors (the error names answered), latency_ms,
answered (false for an acks=0 produce) and sequence (per broker).
"""
from __future__ import annotations

import collections
import json
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from minikafka.control_client import ControlClient, ControlError

DEFAULT_RECORDING_SIZE = 10_000
DEFAULT_WAIT_S = 15.0
WAIT_SLICE_S = 5.0  # one broker: it holds a read this long at most
SHARED_WAIT_SLICE_S = 0.1  # several brokers: each is asked in turn this long at most
CONTROL_MARGIN_S = 5.0


class Recording:
    """The requests recorded on a set of brokers; a context manager (`stop()` on exit)."""

    def __init__(self, controls: Callable[[], list[ControlClient]], size: int = DEFAULT_RECORDING_SIZE) -> None:
        self._controls = controls
        self._entries: collections.deque[dict[str, Any]] = collections.deque(maxlen=size)
        self._open: list[tuple[ControlClient, int, list[int]]] = []  # control, recording id, [last sequence read]
        for control in controls():
            answer = control.call("recording.start", size=size)
            self._open.append((control, int(answer["id"]), [int(answer["sequence"])]))

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def stop(self) -> None:
        """Read what is left, then close the recording on every broker (one that is down is passed over)."""
        for control, recording_id, _after in self._open:
            try:
                self._read(control, _after, 0.0)
                control.call("recording.stop", id=recording_id)
            except (ControlError, OSError):
                pass
        self._open = []

    @property
    def entries(self) -> list[dict[str, Any]]:
        """Every request recorded so far (the last `size` of them), oldest first."""
        self._refresh()
        return list(self._entries)

    def filter(self, api: str | None = None, topic: str | None = None, **fields: Any) -> list[dict[str, Any]]:
        """The entries of `api` (Kafka's name), with an entry for `topic`, whose other fields are as given."""
        self._refresh()
        return [entry for entry in self._entries if _matches(entry, api, topic, fields)]

    def wait_for(self, api: str | None = None, timeout: float = DEFAULT_WAIT_S, topic: str | None = None, *,
                 earlier: bool = False, **fields: Any) -> dict[str, Any]:
        """The first request recorded after this call that matches as `filter` does (with `earlier`, the first
        the recording holds, however old), waiting for one until `timeout`; each broker answers when it records a
        request. TimeoutError naming the last requests seen otherwise."""
        deadline = time.monotonic() + timeout
        self._refresh()
        seen = {} if earlier else {_node(control): after[0] for control, _id, after in self._open}
        while True:
            found = next((entry for entry in self.filter(api, topic, **fields)
                          if entry["sequence"] > seen.get(entry["node"], -1)), None)
            if found is not None:
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                last = [f"{e['api']} v{e['version']} from {e['client_id']}" for e in list(self._entries)[-5:]]
                wanted = {"api": api, "topic": topic, **fields}
                raise TimeoutError(f"waited {timeout:g} s for a {'' if earlier else 'new '}request with "
                                   f"{ {k: v for k, v in wanted.items() if v is not None} }; "
                                   f"{len(self._entries)} recorded, the last: {last or 'none'}")
            slice_s = WAIT_SLICE_S if len(self._open) == 1 else SHARED_WAIT_SLICE_S
            for control, _id, after in self._open:
                try:
                    self._read(control, after, min(remaining, slice_s))
                except (ControlError, OSError):
                    continue  # a broker going down: the others are still read

    def dump_jsonl(self, path: str | Path) -> None:
        """Write the entries, one JSON object a line."""
        with open(path, "w", encoding="utf-8") as out:
            for entry in self.entries:
                out.write(json.dumps(entry, sort_keys=True) + "\n")

    def _refresh(self) -> None:
        for control, _id, after in self._open:
            try:
                self._read(control, after, 0.0)
            except (ControlError, OSError):
                continue
        if len(self._open) > 1:  # the brokers' records, merged in time order
            self._entries = collections.deque(sorted(self._entries, key=lambda entry: entry["time"]),
                                              maxlen=self._entries.maxlen)

    def _read(self, control: ControlClient, after: list[int], wait_s: float) -> None:
        answer = control.with_timeout(wait_s + CONTROL_MARGIN_S).call(
            "recording.read", after=after[0], timeout_ms=int(wait_s * 1000))
        node = _node(control)
        for entry in answer["entries"]:
            self._entries.append({"node": node, **entry})
        after[0] = max(after[0], int(answer["sequence"]))


def _node(control: ControlClient) -> str:
    """How entries name the broker that recorded them: its control address."""
    return f"{control.address[0]}:{control.address[1]}"


def _matches(entry: dict[str, Any], api: str | None, topic: str | None, fields: dict[str, Any]) -> bool:
    if api is not None and entry["api"] != api:
        return False
    if topic is not None and not any(partition[0] == topic for partition in entry["partitions"]):
        return False
    return all(entry.get(name) == value for name, value in fields.items())
