"""The broker-side fault injector: injected error codes, response latency and a disk quota.

Every request a Kafka client sends passes through `FaultInjector.handle` (the one hook in KafkaApis.process).
Faults are rules added and cleared through the control API; none of them touches stored data:
- an error rule answers the next N requests of one API key with an error code, either for the whole request
  (the handler does not run, so nothing is appended, committed or created) or only for the entries of one
  topic or topic-partition (those entries are removed from the request before the handler sees it, and put
  back into its response carrying the error, as a Kafka broker answers a partition it cannot serve);
- a latency rule holds responses back for a while (released early when cleared or at shutdown);
- a disk quota makes appends that would take the log dirs past it fail, before anything is written, with the
  ENOSPC a full disk gives (so produce answers KAFKA_STORAGE_ERROR). It is checked where every append passes,
  ReplicaManager.append_records (`check_disk_quota`), so group coordinator writes hit it too, as in Kafka.
"""
from __future__ import annotations

import errno
import itertools
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from minikafka.protocol.codec import SCHEMAS
from minikafka.protocol.errors import ErrorCode

from .server import CloseConnection

if TYPE_CHECKING:
    from .broker_server import BrokerServer
    from .kafka_apis import RequestContext

log = logging.getLogger("minikafka.faults")

PRODUCE_KEY = 0
METADATA_KEY = 3
INJECTED_MESSAGE = "injected by minikafka fault injection"
# The purgatory key that held-back responses wait on; checking it releases them.
LATENCY_KEY = ("minikafka", "latency")


class FaultError(ValueError):
    """A fault that cannot be added as asked; the message says why."""


# Disk quotas by resolved log dir. Module state, so the append path needs no handle on the injector; keyed by
# directory, so brokers sharing a process (in-process test brokers) never see each other's quota.
_DISK_QUOTAS: dict[Path, int] = {}


def check_disk_quota(log_dirs: Iterable[Any], size: int) -> None:
    """Raise ENOSPC, as a full disk would, if `size` more bytes would take these log dirs past their quota.

    `log_dirs` are the broker's LogDirs (or paths). Costs nothing while no quota is set.
    """
    if not _DISK_QUOTAS:
        return
    paths = [Path(getattr(d, "path", d)).resolve() for d in log_dirs]
    quotas = [_DISK_QUOTAS[p] for p in paths if p in _DISK_QUOTAS]
    if not quotas:
        return
    quota = min(quotas)
    used = sum(_tree_bytes(p) for p in paths)
    if used + size > quota:
        raise OSError(errno.ENOSPC, f"No space left on device (minikafka disk quota: {used} of {quota} bytes "
                                    f"used, {size} more asked)")


# ---- where topics and partitions sit in requests and responses -------------------------------------------------

@dataclass(frozen=True)
class Level:
    """One nesting level of an API's per-entity entries: the request field and its response twin."""

    kind: str  # "group", "topic", "partition" or "resource"
    request: str
    response: str


def _g(req: str, resp: str) -> Level:
    return Level("group", req, resp)


def _t(req: str, resp: str) -> Level:
    return Level("topic", req, resp)


def _p(req: str, resp: str) -> Level:
    return Level("partition", req, resp)


def _r(req: str, resp: str) -> Level:
    return Level("resource", req, resp)


# Per API key, the shapes its versions use (the first whose outer request field exists in the request's version).
SHAPES: dict[int, list[tuple[Level, ...]]] = {
    0: [(_t("topic_data", "responses"), _p("partition_data", "partition_responses"))],
    1: [(_t("topics", "responses"), _p("partitions", "partitions"))],
    2: [(_t("topics", "topics"), _p("partitions", "partitions"))],
    3: [(_t("topics", "topics"),)],
    8: [(_t("topics", "topics"), _p("partitions", "partitions"))],
    9: [(_g("groups", "groups"), _t("topics", "topics"), _p("partition_indexes", "partitions")),
        (_t("topics", "topics"), _p("partition_indexes", "partitions"))],
    15: [(_g("groups", "groups"),)],
    19: [(_t("topics", "topics"),)],
    20: [(_t("topics", "responses"),), (_t("topic_names", "responses"),)],
    21: [(_t("topics", "topics"), _p("partitions", "partitions"))],
    23: [(_t("topics", "topics"), _p("partitions", "partitions"))],
    28: [(_t("topics", "topics"), _p("partitions", "partitions"))],
    32: [(_r("resources", "results"),)],
    33: [(_r("resources", "responses"),)],
    37: [(_t("topics", "results"),)],
    42: [(_g("groups_names", "results"),)],
    44: [(_r("resources", "responses"),)],
    47: [(_t("topics", "topics"), _p("partitions", "partitions"))],
    75: [(_t("topics", "topics"),)],
}

_IDENTITY = {
    "group": ("group_id",),
    "topic": ("name", "topic"),
    "partition": ("partition_index", "partition", "index"),
    "resource": ("resource_type", "resource_name"),
}


def _field_in_version(obj_cls: type, name: str, version: int) -> bool:
    field = obj_cls._struct.fields.get(name)
    return field is not None and field.for_version_q(version)


def shape_for(api_key: int, version: int) -> tuple[Level, ...] | None:
    request_cls = SCHEMAS[api_key].request
    for shape in SHAPES.get(api_key, ()):
        if _field_in_version(request_cls, shape[0].request, version):
            return shape
    return None


def _has_top_error(api_key: int) -> bool:
    return "error_code" in SCHEMAS[api_key].response._struct.fields


def _entry_class(container_cls: type, field_name: str) -> type:
    return container_cls._struct.fields[field_name].data_class


def api_key_of(api: int | str) -> int:
    """An API key from its number or its Kafka name ("Produce", "ProduceRequest", "produce")."""
    if isinstance(api, int) or (isinstance(api, str) and api.strip().lstrip("-").isdigit()):
        key = int(api)
        if key not in SCHEMAS:
            raise FaultError(f"unknown API key {key}")
        return key
    wanted = api.strip().lower().removesuffix("request")
    for key, schema in SCHEMAS.items():
        if schema.request.__name__.lower().removesuffix("request") == wanted:
            return key
    raise FaultError(f"unknown API {api!r}")


def api_name(api_key: int) -> str:
    return SCHEMAS[api_key].request.__name__.removesuffix("Request")


def error_code_of(error: int | str) -> ErrorCode:
    """An error code from its number or its Kafka name ("NOT_LEADER_OR_FOLLOWER")."""
    try:
        if isinstance(error, int) or error.strip().lstrip("-").isdigit():
            return ErrorCode(int(error))
        return ErrorCode[error.strip().upper()]
    except (KeyError, ValueError):
        raise FaultError(f"unknown error code {error!r}") from None


# ---- rules -------------------------------------------------------------------------------------------------------

@dataclass
class ErrorRule:
    id: int
    api_key: int
    error_code: int
    remaining: int | None  # None: every matching request until cleared
    topic: str | None = None
    partition: int | None = None

    def describe(self) -> dict[str, Any]:
        return {"kind": "error", **asdict(self), "api": api_name(self.api_key),
                "error": ErrorCode(self.error_code).name}


@dataclass
class LatencyRule:
    id: int
    delay_ms: int
    api_key: int | None  # None: every API
    remaining: int | None

    def describe(self) -> dict[str, Any]:
        return {"kind": "latency", **asdict(self),
                "api": None if self.api_key is None else api_name(self.api_key)}


Handler = Callable[["RequestContext", Any], Awaitable[Any]]


class FaultInjector:
    def __init__(self, broker: BrokerServer) -> None:
        self._broker = broker
        self._ids = itertools.count(1)
        self.error_rules: list[ErrorRule] = []
        self.latency_rules: list[LatencyRule] = []
        self.disk_quota_bytes: int | None = None
        self._log_dirs = [Path(d).resolve() for d in broker.config.log_dirs]
        for path in self._log_dirs:  # a (re)started broker starts without faults, whatever came before
            _DISK_QUOTAS.pop(path, None)

    # ---- adding and clearing ------------------------------------------------------------------------------------

    def add_error(self, api: int | str, error: int | str, count: int | None = 1, topic: str | None = None,
                  partition: int | None = None) -> ErrorRule:
        api_key = api_key_of(api)
        code = error_code_of(error)
        if code == ErrorCode.NONE:
            raise FaultError("error code NONE is not an error")
        if count is not None and count < 1:
            raise FaultError(f"count must be at least 1 (or none for every request), got {count}")
        if partition is not None and topic is None:
            raise FaultError("a partition needs its topic")
        kinds = {level.kind for shape in SHAPES.get(api_key, ()) for level in shape}
        if topic is not None and "topic" not in kinds:
            raise FaultError(f"{api_name(api_key)} requests do not name topics; inject the error for the whole "
                             "request instead")
        if partition is not None and "partition" not in kinds:
            raise FaultError(f"{api_name(api_key)} errors are per topic, not per partition")
        if topic is None and not _has_top_error(api_key) and api_key not in SHAPES:
            raise FaultError(f"{api_name(api_key)} responses carry no error code to inject")
        rule = ErrorRule(next(self._ids), api_key, int(code), count, topic, partition)
        self.error_rules.append(rule)
        log.warning("fault added: %s", rule.describe())
        return rule

    def add_latency(self, delay_ms: int, api: int | str | None = None, count: int | None = None) -> LatencyRule:
        if delay_ms < 0:
            raise FaultError(f"latency must not be negative, got {delay_ms} ms")
        if count is not None and count < 1:
            raise FaultError(f"count must be at least 1 (or none for every request), got {count}")
        rule = LatencyRule(next(self._ids), int(delay_ms), None if api is None else api_key_of(api), count)
        self.latency_rules.append(rule)
        log.warning("fault added: %s", rule.describe())
        return rule

    def set_disk_quota(self, quota_bytes: int | None) -> int:
        """Cap the log dirs' size at `quota_bytes` (None: their size now, i.e. the disk is full); returns it."""
        quota = self.disk_usage() if quota_bytes is None else int(quota_bytes)
        if quota < 0:
            raise FaultError(f"disk quota must not be negative, got {quota}")
        self.disk_quota_bytes = quota
        for path in self._log_dirs:
            _DISK_QUOTAS[path] = quota
        log.warning("fault added: disk quota of %d bytes on %s (in use: %d)", quota,
                    ", ".join(map(str, self._broker.config.log_dirs)), self.disk_usage())
        return quota

    def clear(self, kind: str | None = None, rule_id: int | None = None) -> int:
        """Remove faults (all, one kind: "error", "latency" or "disk", or one rule by id); returns how many."""
        if kind not in (None, "error", "latency", "disk"):
            raise FaultError(f"unknown fault kind {kind!r}: expected error, latency or disk")
        cleared = 0
        if kind in (None, "error"):
            kept = [r for r in self.error_rules if rule_id is not None and r.id != rule_id]
            cleared += len(self.error_rules) - len(kept)
            self.error_rules = kept
        if kind in (None, "latency"):
            kept_latency = [r for r in self.latency_rules if rule_id is not None and r.id != rule_id]
            cleared += len(self.latency_rules) - len(kept_latency)
            self.latency_rules = kept_latency
            self._broker.purgatory.check_and_complete(LATENCY_KEY)
        if kind in (None, "disk") and rule_id is None and self.disk_quota_bytes is not None:
            self.disk_quota_bytes = None
            for path in self._log_dirs:
                _DISK_QUOTAS.pop(path, None)
            cleared += 1
        if cleared:
            log.warning("faults cleared: %d (%s)", cleared, kind or "all")
        return cleared

    def describe(self) -> list[dict[str, Any]]:
        faults = [r.describe() for r in self.error_rules] + [r.describe() for r in self.latency_rules]
        if self.disk_quota_bytes is not None:
            faults.append({"kind": "disk", "quota_bytes": self.disk_quota_bytes, "used_bytes": self.disk_usage()})
        return faults

    def disk_usage(self) -> int:
        """Bytes stored under the log dirs (sparse, preallocated index files count what they occupy)."""
        return sum(_tree_bytes(path) for path in self._log_dirs)

    # ---- the request hook ---------------------------------------------------------------------------------------

    async def handle(self, ctx: RequestContext, request: Any, handler: Handler) -> Any:
        """Answer one request, applying whatever faults match it; with none, this is just `handler`."""
        if not (self.error_rules or self.latency_rules):
            return await handler(ctx, request)
        response = await self._respond(ctx, request, handler)
        delay_ms = self._take_latency(ctx.header.api_key)
        if delay_ms:
            await self._broker.purgatory.wait_any([LATENCY_KEY], delay_ms / 1000)
        return response

    async def _respond(self, ctx: RequestContext, request: Any, handler: Handler) -> Any:
        api_key = ctx.header.api_key
        shape = shape_for(api_key, ctx.version)
        for rule in list(self.error_rules):
            if rule.api_key != api_key:
                continue
            code = ErrorCode(rule.error_code)
            if rule.topic is None:
                self._spend(rule)
                log.info("injecting %s into %s from %s", code.name, api_name(api_key), ctx.conn.peer)
                if api_key == PRODUCE_KEY and request.acks == 0:
                    raise CloseConnection(f"injected {code.name} into an acks=0 produce")
                return build_error_response(ctx, request, shape, code)
            if shape is None:
                continue
            target = _target_depth(shape, rule.partition is not None)
            pruned = prune(ctx, request, shape, target, lambda keys, _entry, r=rule: _rule_matches(r, keys))
            if pruned:
                self._spend(rule)
                log.info("injecting %s into %s for %s from %s", code.name, api_name(api_key),
                         _describe_target(rule), ctx.conn.peer)
                return await self._finish(ctx, request, handler, shape, [(path, code) for path in pruned])
            if api_key == METADATA_KEY and request.topics is None:
                response = await handler(ctx, request)
                if overwrite_topic_errors(response, rule.topic, code):
                    self._spend(rule)
                return response
        return await handler(ctx, request)

    async def _finish(self, ctx: RequestContext, request: Any, handler: Handler, shape: tuple[Level, ...],
                      errors: list[tuple[list, ErrorCode]]) -> Any:
        if hasattr(request, "max_wait_ms"):
            request.max_wait_ms = 0  # as in Kafka, a fetch with a partition in error is answered at once
        response = await handler(ctx, request)
        if response is None:
            # An acks=0 produce: Kafka closes the connection when any partition fails.
            raise CloseConnection("injected error into an acks=0 produce")
        for path, code in errors:
            splice(ctx, response, shape, path, code)
        return response

    def _spend(self, rule: ErrorRule) -> None:
        if rule.remaining is not None:
            rule.remaining -= 1
            if rule.remaining <= 0:
                self.error_rules.remove(rule)

    def _take_latency(self, api_key: int) -> int:
        for rule in self.latency_rules:
            if rule.api_key is None or rule.api_key == api_key:
                if rule.remaining is not None:
                    rule.remaining -= 1
                    if rule.remaining <= 0:
                        self.latency_rules.remove(rule)
                return rule.delay_ms
        return 0


def _tree_bytes(root: Path) -> int:
    total = 0
    stack = [root]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    total += min(st.st_size, st.st_blocks * 512)
            except OSError:
                continue
    return total


def _describe_target(rule: ErrorRule) -> str:
    return rule.topic if rule.partition is None else f"{rule.topic}-{rule.partition}"


def _target_depth(shape: tuple[Level, ...], by_partition: bool) -> int:
    kind = "partition" if by_partition else "topic"
    return next(i for i, level in enumerate(shape) if level.kind == kind)


def _rule_matches(rule: ErrorRule, keys: list[tuple[str, Any]]) -> bool:
    for kind, key in keys:
        if kind == "topic" and key != rule.topic:
            return False
        if kind == "partition" and rule.partition is not None and key != rule.partition:
            return False
    return True


# ---- shaping error responses -------------------------------------------------------------------------------------

def entry_key(ctx: RequestContext, kind: str, entry: Any) -> Any:
    """The identity of a request or response entry: a group id, topic name, partition index or config resource."""
    if isinstance(entry, (str, int)):
        return entry
    if kind == "resource":
        return (entry.resource_type, entry.resource_name)
    for name in _IDENTITY[kind]:
        if _field_in_version(type(entry), name, ctx.version):
            value = getattr(entry, name)
            if value is not None:
                return value
    if kind == "topic" and _field_in_version(type(entry), "topic_id", ctx.version):
        topic = ctx.broker.controller.topics_by_id.get(entry.topic_id)
        return topic.name if topic is not None else entry.topic_id
    return None


def prune(ctx: RequestContext, container: Any, shape: tuple[Level, ...], target: int,
          matches: Callable[[list, Any], bool]) -> list[list]:
    """Remove the entries at depth `target` for which `matches(keys, entry)` holds; returns their paths."""
    removed: list[list] = []

    def walk(holder: Any, depth: int, path: list, keys: list) -> None:
        level = shape[depth]
        entries = getattr(holder, level.request, None)
        if not entries:
            return
        kept = []
        for entry in entries:
            entry_keys = keys + [(level.kind, entry_key(ctx, level.kind, entry))]
            if depth == target:
                if matches(entry_keys, entry):
                    removed.append(path + [entry])
                    continue
            elif depth < target and not isinstance(entry, (str, int)):
                walk(entry, depth + 1, path + [entry], entry_keys)
            kept.append(entry)
        if len(kept) != len(entries):
            setattr(holder, level.request, kept)

    walk(container, 0, [], [])
    return removed


def _set_error(obj: Any, code: ErrorCode) -> None:
    fields = obj._struct.fields
    if "error_code" in fields:
        obj.error_code = int(code)
    if "error_message" in fields:
        obj.error_message = INJECTED_MESSAGE
    for name, field in fields.items():
        # Offsets and watermarks of an entry in error are unknown (-1), as Kafka answers.
        if field.type_str == "int64" and (name.endswith("offset") or name == "high_watermark"):
            setattr(obj, name, -1)


def _identity_entry(ctx: RequestContext, cls: type, level: Level, request_entry: Any) -> Any:
    fields = cls._struct.fields
    values: dict[str, Any] = {}
    key = entry_key(ctx, level.kind, request_entry)
    if level.kind == "resource":
        values = {"resource_type": request_entry.resource_type, "resource_name": request_entry.resource_name}
    elif level.kind == "topic":
        topic_id = None if isinstance(request_entry, str) else getattr(request_entry, "topic_id", None)
        for name in ("name", "topic"):
            if name in fields:
                values[name] = key if isinstance(key, str) else None
        if "topic_id" in fields and topic_id is not None:
            values["topic_id"] = topic_id
        elif "topic_id" in fields and isinstance(key, str):
            known = ctx.broker.controller.topics.get(key)
            if known is not None:
                values["topic_id"] = known.uuid
    else:
        for name in _IDENTITY[level.kind]:
            if name in fields:
                values[name] = key
                break
    entry = cls(**{k: v for k, v in values.items() if k in fields})
    for name, field in fields.items():
        if name not in values and field.is_array() and not field.is_struct_array() and getattr(entry, name) is None:
            setattr(entry, name, [])
    return entry


def mirror(ctx: RequestContext, cls: type, shape: tuple[Level, ...], request_entry: Any, code: ErrorCode) -> Any:
    """A response entry for `request_entry` and everything under it, all carrying `code`."""
    entry = _identity_entry(ctx, cls, shape[0], request_entry)
    _set_error(entry, code)
    if len(shape) > 1 and not isinstance(request_entry, (str, int)):
        child = shape[1]
        child_cls = _entry_class(cls, child.response)
        children = getattr(request_entry, child.request, None) or []
        setattr(entry, child.response, [mirror(ctx, child_cls, shape[1:], c, code) for c in children])
    elif len(shape) > 1:
        setattr(entry, shape[1].response, [])
    return entry


def build_error_response(ctx: RequestContext, request: Any, shape: tuple[Level, ...] | None,
                         code: ErrorCode) -> Any:
    """The whole request answered with `code`, like Kafka's AbstractRequest.getErrorResponse."""
    response = ctx.response()
    if "throttle_time_ms" in response._struct.fields:
        response.throttle_time_ms = 0
    if "error_code" in response._struct.fields:
        response.error_code = int(code)
    if "error_message" in response._struct.fields:
        response.error_message = INJECTED_MESSAGE
    if shape is not None:
        top = shape[0]
        cls = _entry_class(ctx.response_class, top.response)
        entries = getattr(request, top.request, None) or []
        setattr(response, top.response, [mirror(ctx, cls, shape, e, code) for e in entries])
    return response


def splice(ctx: RequestContext, response: Any, shape: tuple[Level, ...], path: list, code: ErrorCode) -> None:
    """Put the request entries at `path` back into `response`, carrying `code`."""
    holder, holder_cls = response, ctx.response_class
    for depth, request_entry in enumerate(path):
        level = shape[depth]
        cls = _entry_class(holder_cls, level.response)
        entries = getattr(holder, level.response, None)
        if entries is None:
            entries = []
            setattr(holder, level.response, entries)
        if depth == len(path) - 1:
            entries.append(mirror(ctx, cls, shape[depth:], request_entry, code))
            return
        key = entry_key(ctx, level.kind, request_entry)
        found = next((e for e in entries if entry_key(ctx, level.kind, e) == key), None)
        if found is None:
            found = _identity_entry(ctx, cls, level, request_entry)
            setattr(found, shape[depth + 1].response, [])
            entries.append(found)
        holder, holder_cls = found, cls


def overwrite_topic_errors(response: Any, topic: str, code: ErrorCode) -> bool:
    """Metadata for all topics: give `topic`'s entry the error (and no partitions); True if it was there."""
    hit = False
    for entry in response.topics or ():
        if entry.name == topic:
            entry.error_code = int(code)
            entry.partitions = []
            hit = True
    return hit
