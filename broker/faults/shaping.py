"""Error responses shaped from the request they answer, driven by the APIs' message schemas.

Where topics, partitions, groups and config resources sit differs per API and version; `SHAPES` records it, and
from it an error can be given to a whole request (every entry it named answers with the code, as Kafka's
AbstractRequest.getErrorResponse) or to some entries only: those are pruned from the request before its handler
runs and spliced back into the response carrying the code, as a Kafka broker answers a partition it cannot serve.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS
from minikafka.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from minikafka.broker.metadata.metadata_cache import MetadataCache
    from minikafka.broker.network.request_channel import Request

INJECTED_MESSAGE = "injected by minikafka fault injection"

GROUP = "group"
TOPIC = "topic"
PARTITION = "partition"
RESOURCE = "resource"
PRODUCER = "producer"  # a transaction marker's producer
USER = "user"  # a SCRAM credential's user
RESULT = "result"  # an entry answered by a result of its own, in order, naming nothing (an ACL creation)
DIR = "dir"  # a level of the request alone (a log dir): its entries' children are answered side by side


@dataclass(frozen=True)
class Level:
    """One nesting level of an API's per-entity entries: the request field and its response twin."""

    kind: str  # GROUP, TOPIC, PARTITION or RESOURCE
    request: str
    response: str


Shape = tuple[Level, ...]


@dataclass(frozen=True)
class Answering:
    """What shaping needs of the request it shapes an answer for: its version, its response class, and the
    broker's topics (an entry may name its topic by id)."""

    version: int
    response_class: type
    topics: MetadataCache


def _g(req: str, resp: str) -> Level:
    return Level(GROUP, req, resp)


def _t(req: str, resp: str) -> Level:
    return Level(TOPIC, req, resp)


def _p(req: str, resp: str) -> Level:
    return Level(PARTITION, req, resp)


def _r(req: str, resp: str) -> Level:
    return Level(RESOURCE, req, resp)


def _n(req: str, resp: str) -> Level:
    return Level(RESULT, req, resp)


# Per API, the shapes its versions use (the first whose outer request field exists in the request's version).
SHAPES: dict[ApiKey, list[Shape]] = {
    ApiKey.PRODUCE: [(_t("topic_data", "responses"), _p("partition_data", "partition_responses"))],
    ApiKey.FETCH: [(_t("topics", "responses"), _p("partitions", "partitions"))],
    ApiKey.LIST_OFFSETS: [(_t("topics", "topics"), _p("partitions", "partitions"))],
    ApiKey.METADATA: [(_t("topics", "topics"),)],
    ApiKey.OFFSET_COMMIT: [(_t("topics", "topics"), _p("partitions", "partitions"))],
    ApiKey.OFFSET_FETCH: [(_g("groups", "groups"), _t("topics", "topics"), _p("partition_indexes", "partitions")),
                          (_t("topics", "topics"), _p("partition_indexes", "partitions"))],
    ApiKey.DESCRIBE_GROUPS: [(_g("groups", "groups"),)],
    # v4+ batches its keys (groups or transactional ids, answered alike); v0-3 is answered by its top-level error.
    ApiKey.FIND_COORDINATOR: [(_g("coordinator_keys", "coordinators"),)],
    ApiKey.CREATE_TOPICS: [(_t("topics", "topics"),)],
    ApiKey.DELETE_TOPICS: [(_t("topics", "responses"),), (_t("topic_names", "responses"),)],
    ApiKey.DELETE_RECORDS: [(_t("topics", "topics"), _p("partitions", "partitions"))],
    ApiKey.OFFSET_FOR_LEADER_EPOCH: [(_t("topics", "topics"), _p("partitions", "partitions"))],
    ApiKey.TXN_OFFSET_COMMIT: [(_t("topics", "topics"), _p("partitions", "partitions"))],
    # The producer's form (v0-3); the brokers' batched form (v4+) is answered whole, by its top-level error.
    ApiKey.ADD_PARTITIONS_TO_TXN: [(_t("v3_and_below_topics", "results_by_topic_v3_and_below"),
                                    _p("partitions", "results_by_partition"))],
    ApiKey.DESCRIBE_CONFIGS: [(_r("resources", "results"),)],
    ApiKey.ALTER_CONFIGS: [(_r("resources", "responses"),)],
    ApiKey.CREATE_PARTITIONS: [(_t("topics", "results"),)],
    ApiKey.DELETE_GROUPS: [(_g("groups_names", "results"),)],
    ApiKey.INCREMENTAL_ALTER_CONFIGS: [(_r("resources", "responses"),)],
    ApiKey.OFFSET_DELETE: [(_t("topics", "topics"), _p("partitions", "partitions"))],
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: [(_t("topics", "topics"),)],
    ApiKey.WRITE_TXN_MARKERS: [(Level(PRODUCER, "markers", "markers"), _t("topics", "topics"),
                                _p("partition_indexes", "partitions"))],
    ApiKey.CREATE_ACLS: [(_n("creations", "results"),)],
    ApiKey.DELETE_ACLS: [(_n("filters", "filter_results"),)],
    ApiKey.ALTER_REPLICA_LOG_DIRS: [(Level(DIR, "dirs", ""), _t("topics", "results"), _p("partitions", "partitions"))],
    ApiKey.ALTER_CLIENT_QUOTAS: [(_n("entries", "entries"),)],
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: [(Level(USER, "deletions", "results"),)],
    ApiKey.DESCRIBE_PRODUCERS: [(_t("topics", "topics"), _p("partition_indexes", "partitions"))],
    ApiKey.DESCRIBE_TRANSACTIONS: [(_g("transactional_ids", "transaction_states"),)],
    ApiKey.CONSUMER_GROUP_DESCRIBE: [(_g("group_ids", "groups"),)],
    ApiKey.SHARE_GROUP_DESCRIBE: [(_g("group_ids", "groups"),)],
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: [(_g("groups", "groups"),)],
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: [(_t("topics", "results"), _p("partitions", "partitions"))],
    ApiKey.READ_SHARE_GROUP_STATE: [(_t("topics", "results"), _p("partitions", "partitions"))],
    ApiKey.WRITE_SHARE_GROUP_STATE: [(_t("topics", "results"), _p("partitions", "partitions"))],
    ApiKey.DELETE_SHARE_GROUP_STATE: [(_t("topics", "results"), _p("partitions", "partitions"))],
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: [(_t("topics", "results"), _p("partitions", "partitions"))],
}
# Further request lists answered in the same response list as the shape's first level (a whole-request error).
MORE_ENTRIES: dict[ApiKey, tuple[Level, ...]] = {
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (Level(USER, "upsertions", "results"),),
}

_IDENTITY = {
    GROUP: ("group_id", "key", "transactional_id"),
    PRODUCER: ("producer_id",),
    USER: ("name", "user"),
    RESULT: (),
    DIR: ("path",),
    TOPIC: ("name", "topic"),
    PARTITION: ("partition_index", "partition", "index"),
    RESOURCE: ("resource_type", "resource_name"),
}


def _field_in_version(obj_cls: type, name: str, version: int) -> bool:
    field = obj_cls._struct.fields.get(name)  # type: ignore[attr-defined]
    return field is not None and field.for_version_q(version)


def shape_for(api_key: int, version: int) -> Shape | None:
    """Where this version of the API keeps its entries, or None for an API without per-entity entries."""
    request_cls = SCHEMAS[api_key].request
    for shape in SHAPES.get(ApiKey(api_key), ()):
        if _field_in_version(request_cls, shape[0].request, version):
            return shape
    return None


def entry_kinds(api_key: ApiKey) -> set[str]:
    """The kinds of entity this API's requests name, in any version."""
    return {level.kind for shape in SHAPES.get(api_key, ()) for level in shape}


def has_top_error(api_key: ApiKey) -> bool:
    """Whether the API's response has a request-wide error code."""
    return "error_code" in SCHEMAS[api_key].response._struct.fields


def target_depth(shape: Shape, kind: str) -> int:
    """The nesting level at which entries of `kind` sit in this shape."""
    return next(i for i, level in enumerate(shape) if level.kind == kind)


def _entry_class(container_cls: type, field_name: str) -> type:
    return container_cls._struct.fields[field_name].data_class  # type: ignore[attr-defined]


def entry_key(answering: Answering, kind: str, entry: Any) -> Any:
    """The identity of a request or response entry: a group id, topic name, partition index or config resource."""
    if isinstance(entry, (str, int)):
        return entry
    if kind == RESOURCE:
        return (entry.resource_type, entry.resource_name)
    for name in _IDENTITY[kind]:
        if _field_in_version(type(entry), name, answering.version):
            value = getattr(entry, name)
            if value is not None:
                return value
    if kind == TOPIC and _field_in_version(type(entry), "topic_id", answering.version):
        topic = answering.topics.topics_by_id.get(entry.topic_id)
        return topic.name if topic is not None else entry.topic_id
    return None


def prune(answering: Answering, container: Any, shape: Shape, target: int,
          matches: Callable[[list[tuple[str, Any]]], bool], remove: bool = True) -> list[list[Any]]:
    """Remove the entries at depth `target` whose keys (outermost first) `matches`; returns their paths. With
    `remove` false the request is left as it is: only the paths are found."""
    removed: list[list[Any]] = []

    def walk(holder: Any, depth: int, path: list[Any], keys: list[tuple[str, Any]]) -> None:
        level = shape[depth]
        entries = getattr(holder, level.request, None)
        if not entries:
            return
        kept = []
        for entry in entries:
            entry_keys = keys + [(level.kind, entry_key(answering, level.kind, entry))]
            if depth == target:
                if matches(entry_keys):
                    removed.append(path + [entry])
                    continue
            elif depth < target and not isinstance(entry, (str, int)):
                walk(entry, depth + 1, path + [entry], entry_keys)
            kept.append(entry)
        if remove and len(kept) != len(entries):
            setattr(holder, level.request, kept)

    walk(container, 0, [], [])
    return removed


def _set_error(obj: Any, code: ErrorCode) -> None:
    fields = obj._struct.fields
    for name in ("error_code", "partition_error_code"):
        if name in fields:
            setattr(obj, name, int(code))
    if "error_message" in fields:
        obj.error_message = INJECTED_MESSAGE
    for name, field in fields.items():
        # Offsets and watermarks of an entry in error are unknown (-1), as Kafka answers.
        if field.type_str == "int64" and (name.endswith("offset") or name == "high_watermark"):
            setattr(obj, name, -1)
    _no_node(obj)


def _no_node(obj: Any) -> None:
    """A coordinator that is not known is Kafka's Node.noNode(): node id and port -1, host empty."""
    fields = obj._struct.fields
    for name in ("node_id", "port"):
        if name in fields and fields[name].type_str == "int32":
            setattr(obj, name, -1)


def _identity_entry(answering: Answering, cls: type, level: Level, request_entry: Any) -> Any:
    fields = cls._struct.fields  # type: ignore[attr-defined]
    values: dict[str, Any] = {}
    key = entry_key(answering, level.kind, request_entry)
    if level.kind == RESOURCE:
        values = {"resource_type": request_entry.resource_type, "resource_name": request_entry.resource_name}
    elif level.kind == USER:
        values = {"user": key}
    elif level.kind == TOPIC:
        topic_id = None if isinstance(request_entry, str) else getattr(request_entry, "topic_id", None)
        for name in ("name", "topic"):
            if name in fields:
                values[name] = key if isinstance(key, str) else None
        if "topic_id" in fields and topic_id is not None:
            values["topic_id"] = topic_id
        elif "topic_id" in fields and isinstance(key, str):
            known = answering.topics.topics.get(key)
            if known is not None:
                values["topic_id"] = known.topic_id
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


def mirror(answering: Answering, cls: type, shape: Shape, request_entry: Any, code: ErrorCode) -> Any:
    """A response entry for `request_entry` and everything under it, all carrying `code`."""
    entry = _identity_entry(answering, cls, shape[0], request_entry)
    _set_error(entry, code)
    if len(shape) > 1 and not isinstance(request_entry, (str, int)):
        child = shape[1]
        child_cls = _entry_class(cls, child.response)
        children = getattr(request_entry, child.request, None) or []
        setattr(entry, child.response, [mirror(answering, child_cls, shape[1:], c, code) for c in children])
    elif len(shape) > 1:
        setattr(entry, shape[1].response, [])
    return entry


def build_error_response(answering: Answering, request: Any, shape: Shape | None, code: ErrorCode) -> Any:
    """The whole request answered with `code`, like Kafka's AbstractRequest.getErrorResponse."""
    response = answering.response_class()
    fields = response._struct.fields
    if "throttle_time_ms" in fields:
        response.throttle_time_ms = 0
    if "error_code" in fields:
        response.error_code = int(code)
    if "error_message" in fields:
        response.error_message = INJECTED_MESSAGE
    _no_node(response)
    if shape is not None:
        if not shape[0].response:  # a level of the request alone: its children answered side by side
            children = [c for e in getattr(request, shape[0].request, None) or () for c in
                        getattr(e, shape[1].request, None) or ()]
            shape = shape[1:]
        else:
            children = list(getattr(request, shape[0].request, None) or ())
        top = shape[0]
        cls = _entry_class(answering.response_class, top.response)
        answered = [mirror(answering, cls, shape, e, code) for e in children]
        api_key = ApiKey(answering.response_class.API_KEY)  # type: ignore[attr-defined]
        for more in MORE_ENTRIES.get(api_key, ()):
            answered += [mirror(answering, cls, (more,), e, code) for e in getattr(request, more.request, None) or ()]
        setattr(response, top.response, answered)
    return response


def splice(answering: Answering, response: Any, shape: Shape, path: list[Any], code: ErrorCode) -> None:
    """Put the request entries at `path` back into `response`, carrying `code`."""
    holder, holder_cls = response, answering.response_class
    for depth, request_entry in enumerate(path):
        level = shape[depth]
        if not level.response:
            continue  # a level of the request alone (a log dir): its children sit in the holder
        cls = _entry_class(holder_cls, level.response)
        entries = getattr(holder, level.response, None)
        if entries is None:
            entries = []
            setattr(holder, level.response, entries)
        if depth == len(path) - 1:
            entries.append(mirror(answering, cls, shape[depth:], request_entry, code))
            return
        key = entry_key(answering, level.kind, request_entry)
        found = next((e for e in entries if entry_key(answering, level.kind, e) == key), None)
        if found is None:
            found = _identity_entry(answering, cls, level, request_entry)
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


# The offset fields of the partition entries that carry one, in the APIs that have them.
ENTRY_OFFSET_FIELDS = ("fetch_offset", "committed_offset", "offset")


def request_entries(request: Request, topics: MetadataCache) -> list[tuple[str | None, int | None, int | None]]:
    """The (topic, partition, offset) of each entry of the request (partition None for per-topic entries, offset
    None where it carries none: a Fetch's fetch offset, a committed offset, a DeleteRecords offset)."""
    version = request.header.api_version
    shape = shape_for(request.header.api_key, version)
    if request.schema is None or shape is None or not any(level.kind == TOPIC for level in shape):
        return []
    target = target_depth(shape, PARTITION if any(level.kind == PARTITION for level in shape) else TOPIC)
    answering = Answering(version, request.schema.response[version], topics)
    entries: list[tuple[str | None, int | None, int | None]] = []

    def walk(holder: Any, depth: int, topic: str | None) -> None:
        level = shape[depth]
        for entry in getattr(holder, level.request, None) or ():
            key = entry_key(answering, level.kind, entry)
            topic_here = key if level.kind == TOPIC else topic
            if depth == target:
                offset = next((getattr(entry, name) for name in ENTRY_OFFSET_FIELDS
                               if isinstance(getattr(entry, name, None), int)), None)
                entries.append((topic_here, key if level.kind == PARTITION else None, offset))
            elif not isinstance(entry, (str, int)):
                walk(entry, depth + 1, topic_here)

    walk(request.body, 0, None)
    return entries
