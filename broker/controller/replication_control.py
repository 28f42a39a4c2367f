"""Topics, partitions, leaders and ISRs on the controller (Kafka's ReplicationControlManager).

Each method checks a request against the metadata image and returns the records that carry it out (nothing is
changed here: the quorum controller appends the records and replays them into the image), or raises KafkaError
with Kafka's code. Covered: topic creation with replica placement or explicit assignments, deletion, partition
additions, the effects of a broker being fenced, unfenced or shutting down, ISR changes from partition leaders
(AlterPartition), ElectLeaders, unclean elections and the preferred-leader rebalance. Reassignments are
partition_reassignment's; an ISR change that completes one may move the leadership (NEW_LEADER_ELECTED).

A client request writes at most MAX_RECORDS_PER_USER_OP records, as in Kafka's controller; creations are counted
against it before anything is placed, so an absurd partition count costs no more than a small one.
"""
from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from minikafka.broker.controller.configuration_control import (
    config_records,
    unclean_leader_election_enabled,
    validate_topic_configs,
)
from minikafka.broker.controller.controller_config import QuorumControllerConfig
from minikafka.broker.controller.partition_change_builder import Election, build_partition_change
from minikafka.broker.controller.replica_placer import StripedReplicaPlacer
from minikafka.broker.metadata.metadata_image import (
    FENCE,
    IN_CONTROLLED_SHUTDOWN,
    NO_LEADER,
    NO_LEADER_CHANGE,
    UNFENCE,
    MetadataImage,
    PartitionInfo,
    TopicInfo,
)
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.metadata_records import (
    BrokerRegistrationChangeRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from minikafka.storage.log_dir import validate_topic_name

PARTITION_RECORD_VERSION = 0  # no log directories or eligible leader replicas: the fields this image keeps
# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: the most records one client request may have written, so no
# request can make the controller build, write and replay an unbounded batch.
MAX_RECORDS_PER_USER_OP = 10_000
# ElectLeaders election types
PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1


class OperationTooLargeError(KafkaError):
    """A request whose records would exceed MAX_RECORDS_PER_USER_OP: refused with the POLICY_VIOLATION Kafka's
    controller answers for an over-long batch, found by counting before any record or placement is built."""

    def __init__(self) -> None:
        super().__init__(ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")


@dataclass(frozen=True)
class NewTopic:
    """A CreateTopics entry; -1 partitions or replication factor takes the controller's default (KIP-464)."""

    name: str
    num_partitions: int
    replication_factor: int
    assignments: dict[int, list[int]]
    configs: dict[str, str | None]


@dataclass(frozen=True)
class CreatedTopic:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    replication_factor: int
    configs: dict[str, str]  # the topic's overrides


@dataclass(frozen=True)
class IsrChange:
    """One partition of an AlterPartition request: the ISR its leader proposes, with each member's broker epoch
    as the leader knows it (-1: unknown, not checked)."""

    index: int
    leader_epoch: int
    partition_epoch: int
    new_isr: list[tuple[int, int]]


class ReplicationControl:
    def __init__(self, image: MetadataImage, config: QuorumControllerConfig, placer: StripedReplicaPlacer,
                 marked_for_deletion: Collection[str] = (), *, isr_broker_epochs: bool = True) -> None:
        """`marked_for_deletion`: the store's names of topics still being deleted (a live view).
        `isr_broker_epochs`: whether AlterPartition's ISR members are checked against their broker epochs (KRaft);
        not in ZooKeeper mode (`isr_eligible`)."""
        self._image = image
        self._config = config
        self._placer = placer
        self._marked_for_deletion = marked_for_deletion
        self._isr_broker_epochs = isr_broker_epochs

    # ---- topics ----------------------------------------------------------------------------------------------

    def create_topic(self, topic: NewTopic,
                     room: int = MAX_RECORDS_PER_USER_OP) -> tuple[list[MetadataRecord], CreatedTopic]:
        """The records creating `topic`; the checks and their order are Kafka's CreateTopics ones. `room` is how
        many records the request may still add: a topic needing more raises OperationTooLargeError once it is
        otherwise valid, before its partitions are placed."""
        problem = validate_topic_name(topic.name)
        if problem:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        if topic.name in self._image.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
        if topic.name in self._marked_for_deletion:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' is marked for deletion.")
        if topic.assignments:
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Both numPartitions or replicationFactor and replicasAssignments were set. "
                                 "Both cannot be used at the same time.")
            assigned = self._checked_assignment(topic.assignments, 0, None)
            count, factor = len(assigned), len(assigned[0])
        else:
            if topic.num_partitions == 0 or topic.num_partitions < -1:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
            if topic.replication_factor == 0 or topic.replication_factor < -1:
                raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
            count = self._config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
            factor = (self._config.default_replication_factor if topic.replication_factor == -1
                      else topic.replication_factor)
            self._placer.check(self._active_brokers(), factor)
        nulls = sorted(name for name, value in topic.configs.items() if value is None)
        if nulls:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Null value not supported for topic configs: {','.join(nulls)}")
        configs = {name: value for name, value in topic.configs.items() if value is not None}
        validate_topic_configs(configs, self._config.log_defaults)
        config_changes = config_records(topic.name, {}, configs)
        if 1 + len(config_changes) + count > room:
            raise OperationTooLargeError()
        placement = assigned if topic.assignments else dict(enumerate(self._place(count, factor)))
        topic_id = uuid.uuid4()
        records: list[MetadataRecord] = [TopicRecord(name=topic.name, topic_id=topic_id)]
        records += config_changes
        records += [self._partition_record(topic_id, index, replicas) for index, replicas in placement.items()]
        return records, CreatedTopic(topic.name, topic_id, count, factor, configs)

    def delete_topic(self, topic: TopicInfo) -> list[MetadataRecord]:
        return [RemoveTopicRecord(topic_id=topic.topic_id)]

    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                          room: int = MAX_RECORDS_PER_USER_OP) -> list[MetadataRecord]:
        """The records growing topic `name` to `count` partitions, placed or as assigned; more new partitions
        than `room` (the records the request may still add) raise OperationTooLargeError before any is placed."""
        topic = self._image.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        current = len(topic.partitions)
        if count < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        factor = len(topic.partitions[0].replicas)
        if assignments and len(assignments) != count - current:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Increasing the number of partitions by {count - current} but "
                             f"{len(assignments)} assignments provided.")
        if count - current > room:
            raise OperationTooLargeError()
        if assignments:
            placement = self._checked_assignment({current + i: list(r) for i, r in enumerate(assignments)},
                                                 current, factor)
        else:
            placement = {current + i: replicas for i, replicas in enumerate(self._place(count - current, factor))}
        return [self._partition_record(topic.topic_id, index, replicas) for index, replicas in placement.items()]

    def _place(self, count: int, factor: int) -> list[list[int]]:
        return self._placer.place(self._active_brokers(), count, factor)

    def _active_brokers(self) -> list[int]:
        return [b.broker_id for b in self._image.brokers.values() if b.active]

    def _checked_assignment(self, assignments: dict[int, list[int]], first_index: int,
                            factor: int | None) -> dict[int, list[int]]:
        """Explicit replica assignments as Kafka accepts them: registered brokers, each once, the same number
        for every partition, partitions numbered on from `first_index`, and an active broker in each."""
        for index, replicas in assignments.items():
            if not replicas or len(set(replicas)) != len(replicas):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"partition {index} has an empty or duplicated replica list {replicas}")
            unknown = [r for r in replicas if r not in self._image.brokers]
            if unknown:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"unknown broker ids {unknown}")
            if factor is not None and len(replicas) != factor:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"partition {index} has {len(replicas)} replica(s), but the topic's other "
                                 f"partitions have {factor}")
            factor = len(replicas)
            if not any(self._image.is_active(r) for r in replicas):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"All brokers specified in the manual partition assignment for partition {index} "
                                 f"are fenced or in controlled shutdown.")
        if sorted(assignments) != list(range(first_index, first_index + len(assignments))):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"partitions must be numbered consecutively from {first_index}")
        return dict(sorted(assignments.items()))

    def _partition_record(self, topic_id: uuid.UUID, index: int, replicas: list[int]) -> PartitionRecord:
        """A new partition: its ISR is its active replicas, led by the first of them."""
        isr = [r for r in replicas if self._image.is_active(r)]
        if not isr:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition {len(replicas)} time(s): All brokers are currently "
                             f"fenced or in controlled shutdown.")
        return PartitionRecord(version=PARTITION_RECORD_VERSION, partition_id=index, topic_id=topic_id,
                               replicas=list(replicas), isr=isr, removing_replicas=[], adding_replicas=[],
                               leader=isr[0], leader_recovery_state=0, leader_epoch=0, partition_epoch=0)

    # ---- broker events ----------------------------------------------------------------------------------------

    def broker_fenced(self, broker_id: int) -> list[MetadataRecord]:
        """The broker leaves every ISR (never the last member), new leaders are elected where it led, and it is
        fenced."""
        records = self.remove_from_isrs(broker_id)
        broker = self._image.brokers[broker_id]
        records.append(BrokerRegistrationChangeRecord(version=0, broker_id=broker_id,
                                                      broker_epoch=broker.broker_epoch, fenced=FENCE))
        return records

    def inactive_replica_changes(self) -> list[MetadataRecord]:
        """Partition changes taking every broker that is not active out of leaderships and ISRs."""
        records: list[MetadataRecord] = []
        for topic, index, partition in self._image.partitions():
            inactive_leader = partition.leader != NO_LEADER and not self._image.is_active(partition.leader)
            if inactive_leader or not all(self._image.is_active(r) for r in partition.isr):
                target = [r for r in partition.isr if self._image.is_active(r)]
                if not target and partition.leader in partition.isr:
                    # Kafka takes dead replicas out of an ISR one at a time, down to the last: the leader.
                    target = [partition.leader]
                unclean = unclean_leader_election_enabled(self._image, topic.name, self._config.node_id,
                                                          self._config.log_defaults)
                change = build_partition_change(topic, index, partition, self._image.is_active,
                                                election=Election.UNCLEAN if unclean else Election.ONLINE,
                                                target_isr=target)
                if change is not None:
                    records.append(change)
        return records

    def broker_unfenced(self, broker_id: int) -> list[MetadataRecord]:
        """The broker is unfenced; an offline partition it can lead (its last ISR member, or any replica where
        unclean election is on) elects it. It joins other ISRs only when their leaders ask (AlterPartition)."""
        broker = self._image.brokers[broker_id]
        records: list[MetadataRecord] = [BrokerRegistrationChangeRecord(
            version=0, broker_id=broker_id, broker_epoch=broker.broker_epoch, fenced=UNFENCE)]

        def acceptable(replica: int) -> bool:
            return replica == broker_id or self._image.is_active(replica)

        for topic, index, partition in self._image.partitions():
            if partition.leader == NO_LEADER and broker_id in partition.replicas:
                change = build_partition_change(topic, index, partition, acceptable, election=self._election(topic))
                if change is not None:
                    records.append(change)
        return records

    def broker_in_controlled_shutdown(self, broker_id: int) -> list[MetadataRecord]:
        """The broker enters controlled shutdown: it leaves every ISR it is not the last member of, so its
        leaderships move to other ISR members before it stops."""
        broker = self._image.brokers[broker_id]
        records: list[MetadataRecord] = [BrokerRegistrationChangeRecord(
            version=1, broker_id=broker_id, broker_epoch=broker.broker_epoch,
            in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN)]
        return records + self.remove_from_isrs(broker_id)

    def remove_from_isrs(self, broker_id: int,
                         only: Collection[tuple[uuid.UUID, int]] | None = None) -> list[MetadataRecord]:
        """Partition changes taking the broker out of every ISR and out of leadership (Kafka's
        generateLeaderAndIsrUpdates with the broker to remove); `only` (topic id, index) when given: the replicas
        lost with a failed log dir (Kafka's handleDirectoriesOffline)."""

        def acceptable(replica: int) -> bool:
            return replica != broker_id and self._image.is_active(replica)

        records: list[MetadataRecord] = []
        for topic, index, partition in self._image.partitions():
            if only is not None and (topic.topic_id, index) not in only:
                continue
            if broker_id in partition.isr or partition.leader == broker_id:
                target = [r for r in partition.isr if r != broker_id]
                change = build_partition_change(topic, index, partition, acceptable,
                                                election=self._election(topic), target_isr=target)
                if change is not None:
                    records.append(change)
        return records

    def has_leaderships(self, broker_id: int) -> bool:
        return any(p.leader == broker_id for _, _, p in self._image.partitions())

    def _election(self, topic: TopicInfo) -> Election:
        unclean = unclean_leader_election_enabled(self._image, topic.name, self._config.node_id,
                                                  self._config.log_defaults)
        return Election.UNCLEAN if unclean else Election.ONLINE

    # ---- ISR changes from leaders (AlterPartition, KIP-497 / KIP-841 / KIP-903) ----------------------------------

    def alter_partition(self, sender: int, topic: TopicInfo,
                        change: IsrChange) -> tuple[PartitionChangeRecord | None, ErrorCode, PartitionInfo | None]:
        """(record, error, state the sender should now hold) for one proposed ISR, checked in Kafka's order."""
        partition = topic.partitions.get(change.index)
        if partition is None:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        if change.leader_epoch > partition.leader_epoch or change.partition_epoch > partition.partition_epoch:
            return None, ErrorCode.NOT_CONTROLLER, None  # the sender knows a newer state than this controller
        if change.leader_epoch < partition.leader_epoch:
            return None, ErrorCode.FENCED_LEADER_EPOCH, None
        if sender != partition.leader:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        if change.partition_epoch < partition.partition_epoch:
            return None, ErrorCode.INVALID_UPDATE_VERSION, None
        new_isr = [broker_id for broker_id, _ in change.new_isr]
        if len(set(new_isr)) != len(new_isr) or any(r not in partition.replicas for r in new_isr):
            return None, ErrorCode.INVALID_REQUEST, None
        if partition.leader not in new_isr:
            return None, ErrorCode.INVALID_REQUEST, None
        if not all(self.isr_eligible(broker_id, broker_epoch) for broker_id, broker_epoch in change.new_isr):
            return None, ErrorCode.INELIGIBLE_REPLICA, None
        record = build_partition_change(topic, change.index, partition, self._image.is_active,
                                        election=self._election(topic), target_isr=new_isr)
        if record is not None and record.leader not in (NO_LEADER_CHANGE, sender):
            # The change completed a reassignment that moved the leadership away: the record stands, and the
            # sender learns of its new role from the metadata (Kafka answers NEW_LEADER_ELECTED).
            return record, ErrorCode.NEW_LEADER_ELECTED, None
        return record, ErrorCode.NONE, partition.merge(record) if record is not None else partition

    def isr_eligible(self, broker_id: int, broker_epoch: int) -> bool:
        """May this member of a proposed ISR be in it: registered, unfenced and not shutting down (KIP-841), and in
        KRaft under the broker epoch its leader saw in its fetches, -1 being unknown (KIP-903). In ZooKeeper mode,
        as in Kafka's KafkaController, no epoch is compared: leaders learn none from UpdateMetadata, so for a broker
        restarted but not yet fetching again they send its previous process's, and every ISR change of its
        partitions would be refused meanwhile."""
        broker = self._image.brokers.get(broker_id)
        if broker is None or not broker.active:
            return False
        return not self._isr_broker_epochs or broker_epoch == -1 or broker_epoch == broker.broker_epoch

    # ---- elections -------------------------------------------------------------------------------------------

    def elect_leader(self, topic_name: str, index: int, election_type: int) -> tuple[PartitionChangeRecord | None,
                                                                                       ErrorCode, str | None]:
        """(record, error, message) of an ElectLeaders entry, with Kafka's answers when none is needed or
        possible."""
        topic = self._image.topics.get(topic_name)
        if topic is None:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic_name}"
        partition = topic.partitions.get(index)
        if partition is None:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic_name}-{index}"
        if election_type == PREFERRED_ELECTION and partition.leader == partition.preferred_leader:
            return None, ErrorCode.ELECTION_NOT_NEEDED, None
        if election_type == UNCLEAN_ELECTION and partition.leader != NO_LEADER:
            return None, ErrorCode.ELECTION_NOT_NEEDED, None
        election = Election.PREFERRED if election_type == PREFERRED_ELECTION else Election.UNCLEAN
        record = build_partition_change(topic, index, partition, self._image.is_active, election=election)
        if record is None:
            code = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if election_type == PREFERRED_ELECTION
                    else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
            return None, code, None
        return record, ErrorCode.NONE, None

    def unclean_elections(self, topic: TopicInfo) -> list[MetadataRecord]:
        """Leaders for the offline partitions of a topic on which unclean election was just enabled."""
        records: list[MetadataRecord] = []
        for index, partition in sorted(topic.partitions.items()):
            if partition.leader == NO_LEADER:
                change = build_partition_change(topic, index, partition, self._image.is_active,
                                                election=Election.UNCLEAN)
                if change is not None:
                    records.append(change)
        return records

    def preferred_leader_rebalance(self, imbalance_percentage: int) -> list[MetadataRecord]:
        """Preferred-leader elections for every broker whose share of partitions led by someone else, among those
        it is the preferred leader of, exceeds `leader.imbalance.per.broker.percentage`."""
        preferred: dict[int, list[tuple[TopicInfo, int, PartitionInfo]]] = {}
        for topic, index, partition in self._image.partitions():
            preferred.setdefault(partition.preferred_leader, []).append((topic, index, partition))
        records: list[MetadataRecord] = []
        for broker_id, partitions in sorted(preferred.items()):
            elsewhere = [(t, i, p) for t, i, p in partitions if p.leader != broker_id]
            if not elsewhere or 100 * len(elsewhere) <= imbalance_percentage * len(partitions):
                continue
            for topic, index, partition in elsewhere:
                if broker_id in partition.isr and self._image.is_active(broker_id):
                    change = build_partition_change(topic, index, partition, self._image.is_active,
                                                    election=Election.PREFERRED)
                    if change is not None:
                        records.append(change)
        return records


def partitions_named(image: MetadataImage, wanted: list[tuple[str, int]] | None) -> Iterator[tuple[str, int]]:
    """The partitions an ElectLeaders request names, or every partition when it names none."""
    if wanted is not None:
        yield from wanted
        return
    for topic, index, _ in image.partitions():
        yield topic.name, index
