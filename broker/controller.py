"""The controller: cluster metadata (brokers, topics, partition assignment, leaders, ISR, leader epochs).

It plays the KRaft controller's role for a quorum of one. Its state is a metadata image kept in
`__cluster_metadata.json` in the first log dir, rewritten atomically on every change; brokers apply changes
through the broker server, which creates or deletes logs to match.
"""
from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.log_config import LogConfig
from minikafka.storage.log_dir import validate_topic_name

METADATA_FILE = "__cluster_metadata.json"
PRODUCER_ID_BLOCK = 1000
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass
class PartitionRegistration:
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0


@dataclass
class TopicRegistration:
    name: str
    topic_id: str
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def uuid(self) -> uuid.UUID:
        return uuid.UUID(self.topic_id)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class Controller:
    def __init__(self, metadata_dir: Path, node_id: int, cluster_id: str, log_defaults: LogConfig) -> None:
        self.path = metadata_dir / METADATA_FILE
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.log_defaults = log_defaults
        self.live_brokers = [node_id]
        self.topics: dict[str, TopicRegistration] = {}
        self.topics_by_id: dict[uuid.UUID, TopicRegistration] = {}
        # Producer ids are handed out from a block whose end is persisted first, so none repeats after a crash.
        self._next_producer_id = 0
        self._producer_id_block_end = 0
        self._load()
        self._next_producer_id = self._producer_id_block_end

    def _load(self) -> None:
        if not self.path.exists():
            return
        image = json.loads(self.path.read_text())
        self._producer_id_block_end = image.get("producer_id_block_end", 0)
        for raw in image["topics"]:
            parts = {int(k): PartitionRegistration(**v) for k, v in raw["partitions"].items()}
            self._register(TopicRegistration(raw["name"], raw["topic_id"], parts, raw.get("configs", {})))

    def _register(self, topic: TopicRegistration) -> None:
        self.topics[topic.name] = topic
        self.topics_by_id[topic.uuid] = topic

    def _persist(self) -> None:
        image = {"version": 1, "cluster_id": self.cluster_id, "producer_id_block_end": self._producer_id_block_end,
                 "topics": [asdict(t) for t in self.topics.values()]}
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(image, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def allocate_producer_id(self) -> int:
        if self._next_producer_id >= self._producer_id_block_end:
            self._producer_id_block_end = self._next_producer_id + PRODUCER_ID_BLOCK
            self._persist()
        self._next_producer_id += 1
        return self._next_producer_id - 1

    def topic(self, name: str) -> TopicRegistration:
        found = self.topics.get(name)
        if found is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        return found

    def _check_assignment(self, assignments: dict[int, list[int]], first_index: int) -> None:
        for index, replicas in assignments.items():
            if not replicas or len(set(replicas)) != len(replicas):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"partition {index} has an empty or duplicated replica list {replicas}")
            unknown = [r for r in replicas if r not in self.live_brokers]
            if unknown:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"unknown broker ids {unknown}")
        if sorted(assignments) != list(range(first_index, first_index + len(assignments))):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"partitions must be numbered consecutively from {first_index}")

    def _default_assignment(self, first_index: int, count: int, replication_factor: int) -> dict[int, list[int]]:
        brokers = self.live_brokers
        return {i: [brokers[(i + r) % len(brokers)] for r in range(replication_factor)]
                for i in range(first_index, first_index + count)}

    def validate_new_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignments: dict[int, list[int]], configs: dict[str, str]) -> dict[int, list[int]]:
        """Check a CreateTopics entry as Kafka does; returns the replica assignment to use."""
        problem = validate_topic_name(name)
        if problem:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        if name in self.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Both numPartitions or replicationFactor and replicasAssignments were set. "
                                 "Both cannot be used at the same time.")
            self._check_assignment(assignments, 0)
        else:
            if num_partitions == 0 or num_partitions < -1:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
            if replication_factor == 0 or replication_factor < -1:
                raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 "Replication factor must be larger than 0.")
            if replication_factor > len(self.live_brokers):
                raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"Unable to replicate the partition {replication_factor} time(s): The target "
                                 f"replication factor of {replication_factor} cannot be reached because only "
                                 f"{len(self.live_brokers)} broker(s) are registered.")
            assignments = self._default_assignment(0, num_partitions, replication_factor)
        try:
            LogConfig.from_props(configs, self.log_defaults)
        except ValueError as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        return assignments

    def create_topic(self, name: str, assignments: dict[int, list[int]], configs: dict[str, str]) -> TopicRegistration:
        topic = TopicRegistration(name, str(uuid.uuid4()), configs=dict(configs))
        for index, replicas in assignments.items():
            topic.partitions[index] = PartitionRegistration(list(replicas), list(replicas), replicas[0])
        self._register(topic)
        self._persist()
        return topic

    def delete_topic(self, name: str) -> TopicRegistration:
        topic = self.topic(name)
        del self.topics[name]
        del self.topics_by_id[topic.uuid]
        self._persist()
        return topic

    def validate_new_partitions(self, name: str, count: int,
                                assignments: list[list[int]] | None) -> dict[int, list[int]]:
        topic = self.topic(name)
        current = len(topic.partitions)
        if count < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        rf = len(topic.partitions[0].replicas)
        if assignments:
            if len(assignments) != count - current:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Increasing the number of partitions by {count - current} but "
                                 f"{len(assignments)} assignments provided.")
            new = {current + i: list(r) for i, r in enumerate(assignments)}
            self._check_assignment(new, current)
            return new
        return self._default_assignment(current, count - current, rf)

    def add_partitions(self, name: str, assignments: dict[int, list[int]]) -> TopicRegistration:
        topic = self.topic(name)
        for index, replicas in assignments.items():
            topic.partitions[index] = PartitionRegistration(list(replicas), list(replicas), replicas[0])
        self._persist()
        return topic

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicRegistration:
        topic = self.topic(name)
        try:
            LogConfig.from_props(configs, self.log_defaults)
        except ValueError as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        topic.configs = dict(configs)
        self._persist()
        return topic
