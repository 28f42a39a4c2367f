"""Fault rules: which requests an injected error or latency applies to, and how many times.

A rule names an API (by Kafka's name or key), optionally the topic (and partition) whose entries fail, optionally
the request's source: "replica" for the requests a follower broker sends its leader (a Fetch or an
OffsetForLeaderEpoch carrying a replica id of 0 or more), "client" for every other request, and optionally `when`:
request fields that must be as given (client id, version, acks, group, transactional id, producer id, isolation
level, a topic or topic and partition the request has entries for, and a least or greatest offset one of them
carries: a Fetch's fetch offset, an OffsetCommit's committed offset, a DeleteRecords offset). `skip` lets that
many matching requests through untouched first: skip=2 fails the third.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from minikafka.broker.network.control_api import ControlRefused
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS
from minikafka.protocol.errors import ErrorCode

REPLICA = "replica"
CLIENT = "client"
SOURCES = (REPLICA, CLIENT)
# The APIs a follower uses to replicate from its leader, the only requests that can come from a replica.
REPLICA_APIS = (ApiKey.FETCH, ApiKey.OFFSET_FOR_LEADER_EPOCH)


class FaultError(ControlRefused):
    """A fault that cannot be added (or cleared) as asked; the message says why, and is the control API's answer."""


def api_key_of(api: int | str) -> ApiKey:
    """An API key from its number or its Kafka name ("ListOffsets", "ListOffsetsRequest", "list_offsets")."""
    if isinstance(api, int) or api.strip().lstrip("-").isdigit():
        number = int(api)
        if number not in SCHEMAS:
            raise FaultError(f"unknown API key {number}")
        return ApiKey(number)
    wanted = api.strip().replace("_", "").lower().removesuffix("request")
    for key in ApiKey:
        if key.api_name.lower() == wanted and key in SCHEMAS:
            return key
    raise FaultError(f"unknown API {api!r}")


def error_code_of(error: int | str) -> ErrorCode:
    """An error code from its number or its Kafka name ("NOT_LEADER_OR_FOLLOWER")."""
    try:
        if isinstance(error, int) or error.strip().lstrip("-").isdigit():
            return ErrorCode(int(error))
        return ErrorCode[error.strip().upper()]
    except (KeyError, ValueError):
        raise FaultError(f"unknown error code {error!r}") from None


def source_of(source: str | None, api_key: ApiKey | None) -> str | None:
    """A rule's source selector, checked: a rule for replica requests of an API replicas never send never fires."""
    if source is None:
        return None
    if source not in SOURCES:
        raise FaultError(f"unknown request source {source!r}: expected {' or '.join(SOURCES)}")
    if source == REPLICA and api_key is not None and api_key not in REPLICA_APIS:
        raise FaultError(f"{api_key.api_name} requests never come from replicas; replicas send only "
                         f"{' and '.join(key.api_name for key in REPLICA_APIS)}")
    return source


def request_source(api_key: int, request: Any) -> str:
    """Who sent a request: a replica (a follower's Fetch or OffsetForLeaderEpoch, replica id 0 or more) or a
    client (everything else)."""
    if api_key not in REPLICA_APIS:
        return CLIENT
    replica_id = getattr(request, "replica_id", None)
    state = getattr(request, "replica_state", None)
    if state is not None:  # Fetch v15+ (KIP-903) moved the replica id into ReplicaState
        replica_id = state.replica_id
    return REPLICA if replica_id is not None and replica_id >= 0 else CLIENT


# What a rule's `when` may select on, and where each is in a request (its header, or a body field of that name).
WHEN_FIELDS = {"client_id": None, "version": None, "acks": "acks", "group": "group_id",
               "transactional_id": "transactional_id", "producer_id": "producer_id",
               "isolation_level": "isolation_level", "topic": None, "partition": None, "min_offset": None,
               "max_offset": None}
# The `when` fields met by one of a request's entries (facts["entries"]: (topic, partition, offset) triples)
# rather than by the request.
ENTRY_FIELDS = ("topic", "partition", "min_offset", "max_offset")

_NAMED_VALUES = {("acks", "all"): -1, ("isolation_level", "read_uncommitted"): 0,
                 ("isolation_level", "read_committed"): 1}


def when_of(when: dict[str, Any] | None) -> dict[str, Any]:
    """A rule's `when`, checked: only WHEN_FIELDS, numbers for the numeric ones ("all" for acks=-1, and isolation
    levels by name, are taken too)."""
    checked: dict[str, Any] = {}
    for name, value in (when or {}).items():
        if name not in WHEN_FIELDS:
            raise FaultError(f"unknown request field {name!r} in when: expected {', '.join(WHEN_FIELDS)}")
        value = _NAMED_VALUES.get((name, value), value) if isinstance(value, str) else value
        if name in ("version", "acks", "producer_id", "isolation_level", "partition", "min_offset", "max_offset"):
            try:
                value = int(value)
            except (TypeError, ValueError):
                raise FaultError(f"when {name} must be a number, got {value!r}") from None
        checked[name] = value
    if "partition" in checked and "topic" not in checked:
        raise FaultError("when partition needs its topic")
    return checked


def request_facts(client_id: str | None, version: int, body: Any, source: str) -> dict[str, Any]:
    """What rules select on in one request: its source, client id and version, and the body fields it has."""
    facts: dict[str, Any] = {"source": source, "client_id": client_id, "version": version}
    for name, attribute in WHEN_FIELDS.items():
        if attribute is not None:
            value = getattr(body, attribute, None)
            if value is not None:
                facts[name] = value
    return facts


def selects(source: str | None, when: dict[str, Any], facts: dict[str, Any]) -> bool:
    """Whether a request with these facts is one a rule's source and `when` select."""
    if source not in (None, facts["source"]):
        return False
    if not all(facts.get(name) == value for name, value in when.items() if name not in ENTRY_FIELDS):
        return False
    if not any(name in when for name in ENTRY_FIELDS):
        return True
    return any(_entry_selected(when, *entry) for entry in facts.get("entries", ()))


def _entry_selected(when: dict[str, Any], topic: str | None, partition: int | None, offset: int | None) -> bool:
    if "topic" in when and topic != when["topic"]:
        return False
    if "partition" in when and partition != when["partition"]:
        return False
    if "min_offset" in when and (offset is None or offset < when["min_offset"]):
        return False
    return "max_offset" not in when or (offset is not None and offset <= when["max_offset"])


def _name(api_key: int | None) -> str | None:
    return None if api_key is None else ApiKey(api_key).api_name


def skip_of(skip: int | None) -> int:
    if skip is None:
        return 0
    if int(skip) < 0:
        raise FaultError(f"skip must not be negative, got {skip}")
    return int(skip)


class Skipping:
    """The first `skip` matching requests go through untouched (counted in `skipped`), the rule applies after."""

    skip: int
    skipped: int

    def take_skip(self) -> bool:
        """Whether this matching request is one to let through."""
        if self.skipped < self.skip:
            self.skipped += 1
            return True
        return False


@dataclass
class ErrorRule(Skipping):
    """Answer matching requests (or only their entries for one topic or partition) with an error code."""

    id: int
    api_key: ApiKey
    error_code: ErrorCode
    remaining: int | None  # None: every matching request until cleared
    topic: str | None = None
    partition: int | None = None
    source: str | None = None  # "replica", "client" or None for both
    when: dict[str, Any] = field(default_factory=dict)  # request fields that must be as given (WHEN_FIELDS)
    hits: int = 0  # requests answered with the error so far
    skip: int = 0  # matching requests to let through before the rule applies
    skipped: int = 0

    def matches(self, api_key: int, facts: dict[str, Any]) -> bool:
        return self.api_key == api_key and selects(self.source, self.when, facts)

    def describe(self) -> dict[str, Any]:
        return {"kind": "error", **asdict(self), "api_key": int(self.api_key), "api": _name(self.api_key),
                "error_code": int(self.error_code), "error": self.error_code.name}


@dataclass
class LatencyRule(Skipping):
    """Hold back the responses to matching requests by `delay_ms`."""

    id: int
    delay_ms: int
    api_key: ApiKey | None  # None: every API
    remaining: int | None
    source: str | None = None
    when: dict[str, Any] = field(default_factory=dict)
    hits: int = 0  # responses held back so far
    skip: int = 0  # matching requests to let through before the rule applies
    skipped: int = 0

    def matches(self, api_key: int, facts: dict[str, Any]) -> bool:
        return self.api_key in (None, api_key) and selects(self.source, self.when, facts)

    def describe(self) -> dict[str, Any]:
        return {"kind": "latency", **asdict(self), "api_key": None if self.api_key is None else int(self.api_key),
                "api": _name(self.api_key)}


@dataclass
class DropRule(Skipping):
    """Carry out matching requests, then close the connection instead of answering: the client never learns that
    its request was done (a response lost on the way), so a retry without idempotence does it twice."""

    id: int
    api_key: ApiKey
    remaining: int | None
    source: str | None = None
    when: dict[str, Any] = field(default_factory=dict)
    hits: int = 0  # responses dropped so far
    skip: int = 0  # matching requests to let through before the rule applies
    skipped: int = 0

    def matches(self, api_key: int, facts: dict[str, Any]) -> bool:
        return self.api_key == api_key and selects(self.source, self.when, facts)

    def describe(self) -> dict[str, Any]:
        return {"kind": "drop-response", **asdict(self), "api_key": int(self.api_key), "api": _name(self.api_key)}
