"""Topic deletion in ZooKeeper mode (Kafka's TopicDeletionManager): a topic stays marked in /admin/delete_topics, with
its znodes, until every replica of it has answered StopReplica (delete).

The controller's image forgets a deleted topic at once (the quorum controller's RemoveTopicRecord), but its
znodes are the record of which brokers still hold its logs: a controller that fails over before the brokers deleted
them finds the mark, deletes the topic again and asks the replicas again. A replica on a broker that is not live
waits for it (Kafka's ineligible deletion): the broker gets its StopReplica when it registers again, and only then
are the topic's znodes and mark removed.

Sans-IO: the controller feeds it the replicas of deleted partitions, the StopReplica answers and the live brokers,
and asks it which StopReplica requests to send and which topics are done.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from minikafka.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]


class TopicDeletionManager:
    def __init__(self) -> None:
        self._outstanding: dict[str, dict[int, set[int]]] = {}  # topic -> partition -> brokers still holding it
        self._asked: set[tuple[int, TopicPartition]] = set()  # (broker, partition) StopReplica sent, unanswered

    @property
    def topics(self) -> list[str]:
        return sorted(self._outstanding)

    def enqueue(self, replicas: Mapping[TopicPartition, Iterable[int]]) -> list[str]:
        """Deleted partitions and the brokers holding their replicas; returns the topics with none to ask."""
        touched = set()
        for (name, index), holders in replicas.items():
            self._outstanding.setdefault(name, {})[index] = set(holders)
            touched.add(name)
        return self._completed(touched)

    def to_stop(self, live_brokers: Iterable[int]) -> dict[int, list[TopicPartition]]:
        """The partitions each live broker must still be sent StopReplica (delete) for; marks them asked."""
        live = set(live_brokers)
        out: dict[int, list[TopicPartition]] = {}
        for name, partitions in sorted(self._outstanding.items()):
            for index, holders in sorted(partitions.items()):
                for broker_id in sorted(holders & live):
                    if (broker_id, (name, index)) not in self._asked:
                        self._asked.add((broker_id, (name, index)))
                        out.setdefault(broker_id, []).append((name, index))
        return out

    def broker_restarted(self, broker_id: int) -> None:
        """A broker registered again: what it was asked under its old registration is asked again."""
        self._asked = {(b, tp) for b, tp in self._asked if b != broker_id}

    def on_stop_replica_response(self, broker_id: int, response: Any) -> list[str]:
        """Take a StopReplica answer from `broker_id`; returns the topics whose every replica is now deleted."""
        touched = set()
        for error in response.partition_errors or []:
            tp = (error.topic_name, error.partition_index)
            self._asked.discard((broker_id, tp))
            holders = self._outstanding.get(tp[0], {}).get(tp[1])
            if holders is None or response.error_code != ErrorCode.NONE or error.error_code != ErrorCode.NONE:
                continue
            holders.discard(broker_id)
            touched.add(tp[0])
        return self._completed(touched)

    def forget(self, name: str) -> None:
        self._outstanding.pop(name, None)
        self._asked = {(b, tp) for b, tp in self._asked if tp[0] != name}

    def _completed(self, names: Iterable[str]) -> list[str]:
        return sorted(n for n in names if n in self._outstanding
                      and not any(self._outstanding[n].values()))
