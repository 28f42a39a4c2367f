"""The control API (private key 10000): fault injection and state inspection for tests and the CLI.

It is served on the Kafka listener but never advertised in ApiVersions. A request is a JSON object with an
"op"; the answer is {"ok": true, ...} or {"ok": false, "error": message}. Operations:
- describe: node, endpoints, log dirs, active faults, requests waiting in the purgatory, and per partition
  leader, leader epoch, replicas, ISR, high watermark, last stable offset, log start offset and each replica's log
  end offset, and this replica's log size, cleaner checkpoint and dirty ratio;
- fault.add (kind error | latency | drop-response | connection-delay | reorder | bandwidth | close-after-bytes |
  partial-fetch | disk | link | fetch-pause | log-dir | txn-markers-hold; the network kinds take "delay_ms",
  "bytes_per_s" and "close_after_bytes" respectively, see broker/faults/network_rules; these rules and the error,
  latency and drop-response rules may select a request source: "replica" or "client", and "when": request fields
  that must be as given (client_id, version, acks, group, transactional_id, producer_id, isolation_level; topic
  and partition: the request has entries for them, and an error rule then answers those entries only; min_offset
  and max_offset: an entry carries a fetch, committed or DeleteRecords offset in that range), and
  "skip": how many matching requests go through untouched before the rule applies; a link
  is cut to node "to", both ways unless "both_ways" is false; fetching is paused for every partition, a "topic" or
  a "topic" and "partition"; a log dir "path" fails as on an I/O error, until the broker restarts; the transaction
  coordinator holds its markers to broker "to", or to any; SASL authentications of a "user", or of everyone, fail
  as with a wrong password: auth-failure; the wall clock steps by "ms", forwards or back, the timers untouched:
  clock-jump, undone when cleared; the broker dies as on kill -9 when its log cleaner reaches a point "at" of a
  segment swap, on a log of "topic" or any: cleaner-crash), fault.clear (kind, id), fault.list, fault.get (id: one
  fault, active or used up or cleared, with its hits);
- the waits below (partition.wait, group.wait_committed, group.wait, topic.wait, topic.wait_records) give up after
  "timeout_ms" of real time: an advance of a manual clock meanwhile does not cut them short;
- partition.wait: until a partition this broker leads has its "high_watermark" or "last_stable_offset" ("offset")
  at or past "at_least", or "timeout_ms" passes; pushed by the changes that wake fetches (appends, high watermark
  moves, leadership changes), not polled. Answers "value" and "reached"; refused when the broker does not lead the
  partition (then ask its leader);
- group.wait_committed: until the "group"'s committed offset of "topic"-"partition" is at or past "at_least", or
  "timeout_ms" passes, on the group's coordinator; woken by its commits, transactions' ends and loads. Answers
  "offset" (null while none is committed) and "reached"; refused when the broker does not coordinate the group;
- group.wait: on the group's coordinator, until the "group" exists in "state" (Kafka's name) with "members" members
  and a generation (a consumer group's group epoch) of at least "generation_at_least", each when given, or
  "timeout_ms" passes; woken whenever a group request is answered, a coordinator timer fires or a rebalance begins.
  Answers "exists", "state", "members", "generation" and "reached"; refused when the broker does not coordinate it;
- topic.wait: until this broker's metadata has the "topic" (with at least "partitions" partitions, if given) and a
  leader for each of its partitions, or "timeout_ms" passes; woken by each change of the metadata it applies.
  Answers "reached" and "seen" (what is missing);
- topic.wait_records: until the partitions of "topic" this broker leads hold "at_least" readable records between
  them (high watermark minus log start offset, summed; transaction markers count, as they take offsets), or
  "timeout_ms" passes; woken by the changes that wake fetches and by metadata changes (leadership). Answers
  "records", "partitions" (those it leads) and "reached";
- share_group.describe: the share-partitions of the "group" this broker leads and has loaded, each with its start
  and end offsets and its in-flight records (offset, state, delivery count, the member holding an acquired one),
  and the group's share sessions here (member, epoch, partitions by topic id);
- recording.start: open a request recording keeping the last "size" requests (10000 if not given); answers its
  "id" and the "sequence" it reads after; recording.read: the recorded requests past "after" (a sequence), each
  with its sequence, waiting up to "timeout_ms" (pushed by the next recorded request) while there are none; answers
  "entries" and "sequence"; recording.stop: close recording "id" (with the last one, the record is dropped);
- connections.close: close every other client connection;
- sessions.expire: end the SASL sessions of a "user" (or of everyone) now: a connection closes at its next request
  unless its client re-authenticates;
- log.clean: one log cleaning pass now over the compacted logs this broker hosts (of "topic", if given), each log
  cleaned once if Kafka's rules make it due (dirty ratio above min.cleanable.dirty.ratio, or max.compaction.lag.ms
  passed), waiting for cleanings under way; answers "cleaned", one entry per log cleaned (offsets, bytes, records);
- shutdown: a clean stop, as on SIGTERM;
- metrics: the node's metrics, by their Prometheus names and labels (see metrics);
- clock.now, clock.advance: the node's clock, a manual one moved forwards (see network/clock_control.py).

With an authorizer, the control API is the super users' (`super.users`) alone, as it can do anything to the
broker: any other principal's request, whatever its operation, is answered {"ok": false, "error":
"CLUSTER_AUTHORIZATION_FAILED: ..."} and nothing is done. Without one, anyone who reaches the listener may use it.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any

import trio
from kafka.protocol.admin.cluster import DescribeClusterRequest

from minikafka.broker.clock.broker_clock import real_time
from minikafka.broker.coordinator.group.group_metadata_manager import GROUPS_CHANGED_KEY, committed_offsets_key
from minikafka.broker.faults.network_rules import KINDS as NETWORK_KINDS
from minikafka.broker.faults.rules import FaultError
from minikafka.broker.log.log_cleaner import CleanerStopped
from minikafka.broker.metadata.metadata_cache import METADATA_CHANGE_KEY, NO_LEADER, is_internal
from minikafka.broker.network.clock_control import CLOCK_OPERATIONS
from minikafka.broker.network.control_api import ControlRefused, Operation, answer_control
from minikafka.broker.network.metrics_endpoint import as_dict
from minikafka.broker.network.network_client import DisconnectedError
from minikafka.broker.network.request_channel import Request
from minikafka.broker.network.socket_server import ConnectionInfo
from minikafka.broker.replication.delayed_fetch import fetch_key
from minikafka.broker.server.broker_services import BrokerServices
from minikafka.broker.server.metrics import broker_families
from minikafka.broker.server.request_recording import RECORDING_KEY
from minikafka.protocol.control import CONTROL_API_KEY
from minikafka.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("minikafka.control")

DESCRIBE_CLUSTER_VERSION = 1
CONTROLLER_ENDPOINT_TYPE = 2  # DescribeCluster asks a controller about the controllers (KIP-919)
CONTROLLER_LOOKUP_S = 5.0


async def process_control(services: BrokerServices, request: Request) -> bytes:
    authorizer = services.authorizer
    return await answer_control(OPERATIONS, services, request.header, request.frame, request.body_pos,
                                request.context, super_users=None if authorizer is None else authorizer.super_users)


def _optional_int(request: dict[str, Any], name: str) -> int | None:
    value = request.get(name)
    return None if value is None else int(value)


async def _describe(services: BrokerServices, request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    wanted = request.get("topics")
    topics = []
    now_ms = int(time.time() * 1000)
    cache = services.metadata_cache
    for name, topic in sorted(cache.topics.items()):
        if wanted is not None and name not in wanted:
            continue
        partitions = []
        for index, reg in sorted(topic.partitions.items()):
            state: dict[str, Any] = {"partition": index, "leader": reg.leader, "leader_epoch": reg.leader_epoch,
                                     "replicas": list(reg.replicas), "isr": list(reg.isr),
                                     "high_watermark": None, "last_stable_offset": None, "log_start_offset": None,
                                     "log_end_offsets": {}}
            hosted = services.replica_manager.get_partition(name, index)
            if hosted is not None:
                state.update(leader=hosted.leader_id, leader_epoch=hosted.leader_epoch,
                             replicas=list(hosted.replicas), isr=list(hosted.isr),
                             high_watermark=hosted.high_watermark,
                             last_stable_offset=hosted.last_stable_offset(),
                             log_start_offset=hosted.log_start_offset)
                ends = {str(r): hosted.remote_log_end_offsets.get(r) for r in hosted.replicas
                        if r != services.node_id}
                ends[str(services.node_id)] = hosted.log_end_offset
                state["log_end_offsets"] = ends
                state["size_bytes"] = hosted.log.size_in_bytes
                cleaner = services.log_cleaner.manager
                state["cleaner_checkpoint"] = cleaner.last_clean_offset((name, index))
                state["dirty_ratio"] = cleaner.dirty_ratio((name, index), now_ms)
            partitions.append(state)
        topics.append({"name": name, "topic_id": str(topic.topic_id), "internal": is_internal(name),
                       "configs": cache.topic_configs(name), "partitions": partitions})
    return {"node_id": services.node_id, "cluster_id": cache.cluster_id, "pid": os.getpid(),
            "endpoints": [{"host": e.host, "port": e.port} for e in services.endpoints],
            "log_dirs": [str(d) for d in services.config.log_dirs], "faults": services.faults.describe(),
            "disk_usage_bytes": services.disk_quota.used_bytes(),
            "delayed_operations": services.purgatory.delayed_operations, "topics": topics}


async def _fault_add(services: BrokerServices, request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    faults = services.faults
    kind = request.get("kind")
    if kind == "error":
        count = request.get("count", 1)
        rule = faults.add_error(request["api"], request["error"], None if count is None else int(count),
                                request.get("topic"), _optional_int(request, "partition"), request.get("source"),
                                request.get("when"), _optional_int(request, "skip"))
        return {"fault": rule.describe()}
    if kind == "latency":
        count = request.get("count")
        latency = faults.add_latency(int(request["delay_ms"]), request.get("api"),
                                     None if count is None else int(count), request.get("source"), request.get("when"),
                                     _optional_int(request, "skip"))
        return {"fault": latency.describe()}
    if kind == "drop-response":
        count = request.get("count", 1)
        dropped = faults.add_drop_response(request["api"], None if count is None else int(count),
                                           request.get("source"), request.get("when"),
                                           _optional_int(request, "skip"))
        return {"fault": dropped.describe()}
    if kind in NETWORK_KINDS:
        count = request.get("count")
        network = faults.add_network_rule(kind, request.get("api"), None if count is None else int(count),
                                          request.get("source"), request.get("when"), _optional_int(request, "skip"),
                                          _optional_int(request, "delay_ms"), _optional_int(request, "bytes_per_s"),
                                          _optional_int(request, "close_after_bytes"))
        return {"fault": network.describe()}
    if kind == "disk":
        return {"fault": faults.fill_disk(_optional_int(request, "quota_bytes"))}
    if kind == "link":
        to = int(request["to"])
        peer = await _control_address(services, to)
        link = await services.faults.cut_link(services.node_id, to, peer, bool(request.get("both_ways", True)))
        return {"fault": link.describe()}
    if kind == "fetch-pause":
        topic, partition = request.get("topic"), _optional_int(request, "partition")
        pause = services.faults.pause_fetching(services.replica_manager.fetcher_manager, topic, partition,
                                               _followed_partitions(services, topic, partition))
        return {"fault": pause.describe()}
    if kind == "log-dir":
        return {"fault": _fail_log_dir(services, str(request.get("path")))}
    if kind == "txn-markers-hold":
        return {"fault": services.faults.hold_transaction_markers(_optional_int(request, "to")).describe()}
    if kind == "auth-failure":
        return {"fault": services.faults.fail_authentication(request.get("user")).describe()}
    if kind == "cleaner-crash":
        return {"fault": services.faults.crash_cleaner(str(request.get("at")), request.get("topic")).describe()}
    if kind == "clock-jump":
        return {"fault": services.faults.jump_clock(int(request["ms"])).describe()}
    raise FaultError(f"unknown fault kind {kind!r}: expected error, latency, drop-response, "
                     f"{', '.join(NETWORK_KINDS)}, disk, link, fetch-pause, log-dir, txn-markers-hold, auth-failure, "
                     "clock-jump or cleaner-crash")


def _fail_log_dir(services: BrokerServices, path: str) -> dict[str, Any]:
    """A log dir failing as on an I/O error; it cannot be cleared (Kafka brings a failed dir back on restart)."""
    log_dir = next((d for d in services.log_manager.log_dirs if str(d.path) == path), None)
    if log_dir is None:
        raise FaultError(f"{path!r} is not a log dir of broker {services.node_id}")
    services.replica_manager.log_dir_failure_channel.maybe_add_offline_log_dir(log_dir.path, "fault injection")
    return {"kind": "log-dir", "path": path}


def _followed_partitions(services: BrokerServices, topic: str | None,
                         partition: int | None) -> frozenset[tuple[str, int]] | None:
    """The partitions a fetch pause covers: all (None), or those named that this broker has a replica of."""
    if topic is None:
        if partition is not None:
            raise FaultError("a partition needs its topic")
        return None
    info = services.metadata_cache.topics.get(topic)
    if info is None:
        raise FaultError(f"unknown topic {topic!r}")
    if partition is not None and partition not in info.partitions:
        raise FaultError(f"topic {topic!r} has no partition {partition}")
    hosted = frozenset((topic, index) for index, state in info.partitions.items()
                       if services.node_id in state.replicas and partition in (None, index))
    if not hosted:
        where = topic if partition is None else f"{topic}-{partition}"
        raise FaultError(f"broker {services.node_id} has no replica of {where} to stop fetching")
    return hosted


async def _control_address(services: BrokerServices, node_id: int) -> tuple[str, int]:
    """Where node `node_id`'s control API listens: a broker's inter-broker listener, or the controller's. A
    controller known only by address is asked its node id (DescribeCluster, KIP-919), which is then kept so that
    the channels to it count as links to that node."""
    if node_id == services.node_id:
        raise FaultError(f"node {node_id} is this broker: a link joins two nodes")
    peer = services.metadata.image.brokers.get(node_id)
    if peer is not None:
        endpoint = peer.endpoint(services.config.inter_broker_listener_name) or next(iter(peer.endpoints), None)
        if endpoint is None:
            raise FaultError(f"broker {node_id} has no listener registered")
        return endpoint.host, endpoint.port
    voter = next((a for a in services.config.controller_addresses if a.node_id == node_id), None)
    if voter is not None:
        return voter.host, voter.port
    R = DescribeClusterRequest[DESCRIBE_CLUSTER_VERSION]
    response = None
    with trio.move_on_after(CONTROLLER_LOOKUP_S):
        try:
            response = await services.controller_channel.send(
                R(include_cluster_authorized_operations=False, endpoint_type=CONTROLLER_ENDPOINT_TYPE),
                DESCRIBE_CLUSTER_VERSION)
        except DisconnectedError as exc:
            raise FaultError(f"node {node_id} is no broker of this cluster, and the controller cannot be asked "
                             f"whether it is the controller: {exc}") from None
    if response is None or response.error_code != ErrorCode.NONE:
        raise FaultError(f"node {node_id} is no broker of this cluster, and the controller did not say whether it "
                         "is the controller")
    controller = next((b for b in response.brokers if b.broker_id == node_id), None)
    if response.controller_id != node_id or controller is None:
        raise FaultError(f"node {node_id} is neither a broker of this cluster nor its controller "
                         f"(node {response.controller_id})")
    services.faults.links.controller_ids.add(node_id)
    return controller.host, controller.port


async def _fault_clear(services: BrokerServices, request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    return {"cleared": await services.faults.clear(request.get("kind"), _optional_int(request, "id"))}


async def _fault_list(services: BrokerServices, _request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    return {"faults": services.faults.describe()}


async def _fault_get(services: BrokerServices, request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    rule_id = _optional_int(request, "id")
    if rule_id is None:
        raise FaultError("fault.get needs the fault's id")
    return {"fault": services.faults.get(rule_id)}


WAITABLE_OFFSETS = ("high_watermark", "last_stable_offset")


async def _partition_wait(services: BrokerServices, request: dict[str, Any], conn: ConnectionInfo
                          ) -> dict[str, Any]:
    tp = (str(request["topic"]), int(request["partition"]))
    what = request.get("offset", "high_watermark")
    if what not in WAITABLE_OFFSETS:
        raise ControlRefused(f"unknown offset {what!r}: expected {' or '.join(WAITABLE_OFFSETS)}")
    at_least = int(request["at_least"])
    replica_manager = services.replica_manager

    def current() -> int:
        partition = replica_manager.get_partition(*tp)
        if partition is None or not partition.is_leader:
            raise ControlRefused(f"broker {services.node_id} does not lead {tp[0]}-{tp[1]}")
        return partition.high_watermark if what == "high_watermark" else partition.last_stable_offset()

    deadline = real_time() + int(request.get("timeout_ms", 30000)) / 1000
    while (value := current()) < at_least and real_time() < deadline:
        await services.purgatory.wait_any([fetch_key(tp)], deadline - real_time(), conn.stream,
                                          lambda: current() >= at_least)
    return {"value": value, "reached": value >= at_least}


async def _group_wait_committed(services: BrokerServices, request: dict[str, Any], conn: ConnectionInfo
                                ) -> dict[str, Any]:
    group_id, tp = str(request["group"]), (str(request["topic"]), int(request["partition"]))
    at_least = int(request["at_least"])
    manager = services.group_coordinator.group_manager

    def current() -> int | None:
        try:
            manager.check_active(group_id)
        except KafkaError as exc:
            raise ControlRefused(f"broker {services.node_id} does not coordinate group {group_id}: {exc}") from None
        group = manager.groups.get(group_id)
        committed = group.offsets.get(tp) if group is not None else None
        return None if committed is None else committed.offset

    def reached() -> bool:
        offset = current()
        return offset is not None and offset >= at_least

    deadline = real_time() + int(request.get("timeout_ms", 30000)) / 1000
    while not reached() and real_time() < deadline:
        await services.purgatory.wait_any([committed_offsets_key(group_id)], deadline - real_time(),
                                          conn.stream, reached)
    return {"offset": current(), "reached": reached()}


async def _group_wait(services: BrokerServices, request: dict[str, Any], conn: ConnectionInfo) -> dict[str, Any]:
    group_id = str(request["group"])
    state, members = request.get("state"), _optional_int(request, "members")
    generation_at_least = _optional_int(request, "generation_at_least")
    coordinator = services.group_coordinator

    def seen() -> dict[str, Any]:
        try:
            coordinator.group_manager.check_active(group_id)
        except KafkaError as exc:
            raise ControlRefused(f"broker {services.node_id} does not coordinate group {group_id}: {exc}") from None
        modern = coordinator.consumer.groups.get(group_id) or coordinator.share.groups.get(group_id)
        if modern is not None:  # a KIP-848 consumer group or a KIP-932 share group: its group epoch is its generation
            return {"exists": True, "state": modern.state.value, "members": len(modern.members),
                    "generation": modern.group_epoch}
        group = coordinator.group_manager.groups.get(group_id)
        if group is None:
            return {"exists": False}
        return {"exists": True, "state": group.state.value, "members": len(group.members),
                "generation": group.generation_id}

    def reached() -> bool:
        now = seen()
        return bool(now["exists"]) and (state is None or now["state"] == state) \
            and (members is None or now["members"] == members) \
            and (generation_at_least is None or now["generation"] >= generation_at_least)

    deadline = real_time() + int(request.get("timeout_ms", 30000)) / 1000
    while not reached() and real_time() < deadline:
        await services.purgatory.wait_any([GROUPS_CHANGED_KEY], deadline - real_time(), conn.stream, reached)
    return {**seen(), "reached": reached()}


async def _topic_wait(services: BrokerServices, request: dict[str, Any], conn: ConnectionInfo) -> dict[str, Any]:
    topic = str(request["topic"])
    wanted = _optional_int(request, "partitions")

    def seen() -> str:
        info = services.metadata_cache.topics.get(topic)
        if info is None:
            return "no such topic"
        leaderless = sorted(p for p, state in info.partitions.items() if state.leader == NO_LEADER)
        if wanted is not None and len(info.partitions) < wanted:
            return f"{len(info.partitions)} partition(s)"
        return f"partition(s) {leaderless} without a leader" if leaderless else "ready"

    deadline = real_time() + int(request.get("timeout_ms", 30000)) / 1000
    while seen() != "ready" and real_time() < deadline:
        await services.purgatory.wait_any([METADATA_CHANGE_KEY], deadline - real_time(), conn.stream,
                                          lambda: seen() == "ready")
    return {"seen": seen(), "reached": seen() == "ready"}


async def _topic_wait_records(services: BrokerServices, request: dict[str, Any], conn: ConnectionInfo
                              ) -> dict[str, Any]:
    topic, at_least = str(request["topic"]), int(request["at_least"])
    replica_manager = services.replica_manager

    def led() -> list[int]:
        info = services.metadata_cache.topics.get(topic)
        return sorted(p for p in (info.partitions if info is not None else ())
                      if (partition := replica_manager.get_partition(topic, p)) is not None and partition.is_leader)

    def records() -> int:
        return sum(max(0, partition.high_watermark - partition.log_start_offset) for p in led()
                   if (partition := replica_manager.get_partition(topic, p)) is not None)

    deadline = real_time() + int(request.get("timeout_ms", 30000)) / 1000
    while records() < at_least and real_time() < deadline:
        watched = led()  # woken again when leadership moves, to watch the partitions it leads then

        def done(watched: list[int] = watched) -> bool:
            return records() >= at_least or led() != watched

        keys = [METADATA_CHANGE_KEY, *(fetch_key((topic, p)) for p in watched)]
        await services.purgatory.wait_any(keys, deadline - real_time(), conn.stream, done)
    count = records()
    return {"records": count, "partitions": led(), "reached": count >= at_least}


async def _recording_start(services: BrokerServices, request: dict[str, Any], _conn: ConnectionInfo
                           ) -> dict[str, Any]:
    try:
        recording_id, sequence = services.recorder.start(_optional_int(request, "size"))
    except ValueError as exc:
        raise ControlRefused(str(exc)) from None
    return {"id": recording_id, "sequence": sequence}


async def _recording_read(services: BrokerServices, request: dict[str, Any], conn: ConnectionInfo
                          ) -> dict[str, Any]:
    recorder, after = services.recorder, int(request.get("after", 0))
    if recorder.sequence <= after and int(request.get("timeout_ms", 0)) > 0:
        await services.purgatory.wait_any([RECORDING_KEY], int(request["timeout_ms"]) / 1000, conn.stream,
                                          lambda: recorder.sequence > after)
    return {"entries": recorder.read(after), "sequence": recorder.sequence}


async def _recording_stop(services: BrokerServices, request: dict[str, Any], _conn: ConnectionInfo
                          ) -> dict[str, Any]:
    services.recorder.stop(int(request["id"]))
    return {}


async def _sessions_expire(services: BrokerServices, request: dict[str, Any],
                           _conn: ConnectionInfo) -> dict[str, Any]:
    expired = services.expire_sessions(request.get("user"))
    log.warning("fault: expired %d SASL session(s)", expired)
    return {"expired": expired}


async def _connections_close(services: BrokerServices, _request: dict[str, Any],
                             conn: ConnectionInfo) -> dict[str, Any]:
    closed = await services.close_connections(conn.connection_id)
    log.warning("fault: closed %d client connection(s)", closed)
    return {"closed": closed}


async def _share_group_describe(services: BrokerServices, request: dict[str, Any], _conn: ConnectionInfo
                                ) -> dict[str, Any]:
    return {"node_id": services.node_id, **services.share_partition_manager.describe(str(request["group"]))}


async def _shutdown(services: BrokerServices, _request: dict[str, Any], conn: ConnectionInfo) -> dict[str, Any]:
    log.info("shutdown requested through the control API by %s", conn.peer)
    services.stop()  # a clean stop as on SIGTERM; the answer still goes out, since shutdown drains requests
    return {}


async def _log_clean(services: BrokerServices, request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    try:
        results = await services.log_cleaner.clean_logs(request.get("topic"))
    except CleanerStopped as exc:
        raise ControlRefused(str(exc)) from None
    return {"cleaned": [result.as_dict() for result in results]}


async def _metrics(services: BrokerServices, _request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    replica_manager = getattr(services, "replica_manager", None)  # built once the broker has caught up
    return {"node_id": services.node_id, "metrics": as_dict(broker_families(
        services.metrics, services.purgatory, services.fetch_sessions, services.metadata, replica_manager,
        getattr(services, "log_cleaner", None)))}


OPERATIONS: dict[str, Operation[BrokerServices]] = {
    "describe": _describe,
    "fault.add": _fault_add,
    "fault.clear": _fault_clear,
    "fault.list": _fault_list,
    "fault.get": _fault_get,
    "partition.wait": _partition_wait,
    "group.wait_committed": _group_wait_committed,
    "topic.wait": _topic_wait,
    "group.wait": _group_wait,
    "recording.start": _recording_start,
    "recording.read": _recording_read,
    "recording.stop": _recording_stop,
    "topic.wait_records": _topic_wait_records,
    "share_group.describe": _share_group_describe,
    "connections.close": _connections_close,
    "sessions.expire": _sessions_expire,
    "shutdown": _shutdown,
    "log.clean": _log_clean,
    "metrics": _metrics,
    **CLOCK_OPERATIONS,
}

# Served by KafkaApis outside the Kafka API table: never advertised, raw frames in and out.
HANDLERS: dict = {}
PRIVATE_HANDLERS = {CONTROL_API_KEY: process_control}
