"""Failed log dirs (Kafka's LogDirFailureChannel and ReplicaManager.handleLogDirFailure).

Whatever meets an I/O error in a log dir reports the dir here; the first report of a dir queues it, later ones are
ignored. The replica manager's handler takes each queued dir offline: the LogManager drops its logs, and the
replicas whose current log was there stop (fetchers removed) and are remembered as offline, so requests for them
answer KAFKA_STORAGE_ERROR while the broker's other dirs keep serving. A dir stays offline until the broker
restarts, as in Kafka.

The controller learns of the lost replicas from an AssignReplicasToDirs request (KIP-858's API) placing them in the
reserved LOST directory: it takes this broker out of their ISRs and elects other leaders where it led, leaving its
other replicas alone. One request serves both controller modes, since both run the same controller logic; it is
sent again until the controller answers it (a controller moving or restarting meanwhile).
"""
from __future__ import annotations

import logging
import math
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from minikafka.broker.replication.delayed_fetch import fetch_key
from minikafka.broker.replication.delayed_produce import produce_key
from minikafka.protocol.control_plane import AssignReplicasToDirsRequest
from minikafka.protocol.errors import ErrorCode
from minikafka.storage.log_dir import LOST_DIRECTORY_ID

if TYPE_CHECKING:
    from minikafka.broker.replication.replica_manager import ReplicaManager

log = logging.getLogger("minikafka.log_dir_failure")

TopicPartition = tuple[str, int]
ASSIGN_REPLICAS_TO_DIRS_VERSION = 0
REPORT_RETRY_BACKOFF_S = 0.5


class LogDirFailureChannel:
    def __init__(self) -> None:
        self.offline: set[Path] = set()
        self._send, self._receive = trio.open_memory_channel[Path](math.inf)

    def maybe_add_offline_log_dir(self, path: Path, message: str, exc: BaseException | None = None) -> None:
        """Report a failed dir; safe to call from the event loop any number of times."""
        if path in self.offline:
            return
        self.offline.add(path)
        log.error("%s: log dir %s failed%s", message, path, f": {exc}" if exc is not None else "")
        self._send.send_nowait(path)

    async def run(self, handle: Callable[[Path], Awaitable[object]], *,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async for path in self._receive:
            await handle(path)


async def handle_log_dir_failure(replica_manager: ReplicaManager, path: Path) -> None:
    """Take `path` offline, then tell the controller which replicas went with it."""
    topic_ids = {tp: p.topic_id for tp, p in replica_manager.partitions.items()}
    lost = take_replicas_offline(replica_manager, path)
    replicas = [(topic_ids[tp], tp[1]) for tp in lost if tp in topic_ids]
    if replicas:
        await report_lost_replicas(replica_manager, replicas)


async def report_lost_replicas(replica_manager: ReplicaManager, replicas: list[tuple[uuid.UUID, int]]) -> None:
    R: Any = AssignReplicasToDirsRequest
    D = R.DirectoryData
    by_topic: dict[uuid.UUID, list[int]] = defaultdict(list)
    for topic_id, index in replicas:
        by_topic[topic_id].append(index)
    while True:
        channel = replica_manager.alter_partition_manager.channel
        if channel is not None:
            request = R(broker_id=replica_manager.node_id, broker_epoch=replica_manager.broker_epoch, directories=[
                D(id=LOST_DIRECTORY_ID, topics=[D.TopicData(topic_id=topic_id, partitions=[
                    D.TopicData.PartitionData(partition_index=i) for i in indexes])
                    for topic_id, indexes in by_topic.items()])])
            try:
                response = await channel.send(request, ASSIGN_REPLICAS_TO_DIRS_VERSION)
            except Exception as exc:  # noqa: BLE001 - any failure to reach the controller is retried
                log.info("lost replicas not reported to the controller yet: %r", exc)
            else:
                if response.error_code == ErrorCode.NONE:
                    log.info("the controller knows of %d replicas lost here", len(replicas))
                    return
                log.info("AssignReplicasToDirs refused: %s; retrying", ErrorCode(response.error_code).name)
        await trio.sleep(REPORT_RETRY_BACKOFF_S)


def take_replicas_offline(replica_manager: ReplicaManager, path: Path) -> list[TopicPartition]:
    """Take `path` offline; returns the partitions whose replica here went offline with it."""
    lost = replica_manager.log_manager.take_offline(path)
    replica_manager.fetcher_manager.remove_fetcher_for_partitions(lost)
    replica_manager.fetcher_manager.shutdown_idle_fetchers()
    for tp in lost:
        partition = replica_manager.partitions.pop(tp, None)
        replica_manager.offline_partitions.add(tp)
        replica_manager.purgatory.check_and_complete(fetch_key(tp))
        replica_manager.purgatory.check_and_complete(produce_key(tp))
        if partition is not None and partition.is_leader:
            for callback in replica_manager.on_become_follower:
                callback(tp)
    if lost:
        log.error("log dir %s offline: replicas of %s stopped", path,
                  ", ".join(f"{t}-{i}" for t, i in sorted(lost)))
    return lost
