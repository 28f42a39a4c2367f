"""The cluster metadata image: the state that replaying KRaft metadata records builds (Kafka's MetadataImage,
with MetadataDelta's account of what a record changed).

The controller builds its next records against it and replays them once they are durable; brokers replay the
records they fetch from the controller. Both must arrive at the same state from the same records, so the rules
live here once. Sans-IO: records in, state and the change they made out.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from minikafka.broker.metadata.acls import acl_of_record
from minikafka.broker.metadata.client_quota_entity import ClientQuotaEntity, quota_entity
from minikafka.broker.metadata.features import DEFAULT_FEATURES_EPOCH
from minikafka.broker.metadata.scram_credentials import ScramCredential, ScramCredentialKey, credential_data
from minikafka.broker.security.acl import AclBinding
from minikafka.protocol.metadata_records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)

NO_LEADER = -1
NO_LEADER_CHANGE = -2  # PartitionChangeRecord.leader when the leader stays
TOPIC_RESOURCE = 2  # ConfigRecord.resource_type values (Kafka's ConfigResource.Type)
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32
CLUSTER_DEFAULT = ""  # broker config resource name of the cluster-wide default

# BrokerRegistrationChangeRecord.fenced values
FENCE = 1
UNFENCE = -1
IN_CONTROLLED_SHUTDOWN = 1


class MetadataReplayError(ValueError):
    """A record that does not fit the image (a partition of an unknown topic, a change to a broker registration
    of another epoch): the log and the image disagree, and going on would serve wrong metadata."""


@dataclass
class BrokerEndpointInfo:
    name: str
    host: str
    port: int
    security_protocol: int


@dataclass
class BrokerInfo:
    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: list[BrokerEndpointInfo]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool

    @property
    def active(self) -> bool:
        """May lead and join ISRs: unfenced and not shutting down (Kafka's ClusterControlManager.isActive)."""
        return not self.fenced and not self.in_controlled_shutdown

    def endpoint(self, listener: str) -> BrokerEndpointInfo | None:
        return next((e for e in self.endpoints if e.name == listener), None)


@dataclass
class PartitionInfo:
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    # An ongoing reassignment (KIP-455): `replicas` holds the target replicas followed by those being removed.
    removing_replicas: list[int] = field(default_factory=list)
    adding_replicas: list[int] = field(default_factory=list)

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0] if self.replicas else NO_LEADER

    @property
    def is_reassigning(self) -> bool:
        return bool(self.removing_replicas or self.adding_replicas)

    def merge(self, record: PartitionChangeRecord) -> PartitionInfo:
        """The state after `record`: fields it leaves at their defaults stay; a new leader (even the same one)
        bumps the leader epoch; every change bumps the partition epoch."""
        leader, leader_epoch = self.leader, self.leader_epoch
        if record.leader != NO_LEADER_CHANGE:
            leader, leader_epoch = record.leader, self.leader_epoch + 1
        return PartitionInfo(
            replicas=list(self.replicas if record.replicas is None else record.replicas),
            isr=list(self.isr if record.isr is None else record.isr),
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=self.partition_epoch + 1,
            removing_replicas=list(self.removing_replicas if record.removing_replicas is None
                                   else record.removing_replicas),
            adding_replicas=list(self.adding_replicas if record.adding_replicas is None else record.adding_replicas),
        )


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)


@dataclass
class MetadataChange:
    """What replaying records changed, for those that act on it (a broker making replicas leaders or followers,
    a log manager applying topic configs, endpoint caches).

    `partitions` holds each changed partition's new state, None when its topic was deleted; `topic_ids` names
    the id of every topic in `partitions`, deleted ones included.
    """

    partitions: dict[tuple[str, int], PartitionInfo | None] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    topic_configs: set[str] = field(default_factory=set)
    broker_configs: set[str] = field(default_factory=set)
    brokers: set[int] = field(default_factory=set)

    def merge(self, later: MetadataChange) -> None:
        """Fold in the change of a later record, so one change describes a whole batch."""
        self.partitions.update(later.partitions)
        self.topic_ids.update(later.topic_ids)
        self.topic_configs |= later.topic_configs
        self.broker_configs |= later.broker_configs
        self.brokers |= later.brokers

    def parts(self, max_partitions: int) -> Iterator[MetadataChange]:
        """This change in parts of at most `max_partitions` partitions, the first also carrying its broker and
        config changes, every one the topic ids: what a publisher can apply one part at a time, letting other
        work run between parts, when a change touches thousands of partitions."""
        if len(self.partitions) <= max_partitions:
            yield self
            return
        items = list(self.partitions.items())
        for start in range(0, len(items), max_partitions):
            part = dict(items[start:start + max_partitions])
            if start == 0:
                yield MetadataChange(part, self.topic_ids, self.topic_configs, self.broker_configs, self.brokers)
            else:
                yield MetadataChange(part, self.topic_ids)


@dataclass
class MetadataImage:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    topics_by_id: dict[uuid.UUID, TopicInfo] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)  # by broker id; "" = cluster default
    group_configs: dict[str, dict[str, str]] = field(default_factory=dict)  # a group's overrides, read when used
    next_producer_id: int = 0
    client_quotas: dict[ClientQuotaEntity, dict[str, float]] = field(default_factory=dict)  # values by key
    # SCRAM credentials (KIP-554) by (user name, mechanism type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512)
    scram_credentials: dict[ScramCredentialKey, ScramCredential] = field(default_factory=dict)
    acls: dict[uuid.UUID, AclBinding] = field(default_factory=dict)  # by ACL id
    acl_version: int = 0  # moves with every change of `acls`: the authorizer's index follows it
    # Feature levels UpdateFeatures finalized (KIP-584), in place of the defaults (features.finalized_levels), and
    # the epoch of the finalized levels ApiVersions answers: moved by every FeatureLevelRecord.
    features: dict[str, int] = field(default_factory=dict)
    features_epoch: int = DEFAULT_FEATURES_EPOCH
    offset: int = -1  # offset of the last record replayed
    controller_epoch: int = -1

    def live_brokers(self) -> list[BrokerInfo]:
        """Registered and not fenced, by id."""
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def is_active(self, broker_id: int) -> bool:
        broker = self.brokers.get(broker_id)
        return broker is not None and broker.active

    def partitions(self) -> Iterator[tuple[TopicInfo, int, PartitionInfo]]:
        """Every partition of every topic, by topic name and index."""
        for _, topic in sorted(self.topics.items()):
            for index, partition in sorted(topic.partitions.items()):
                yield topic, index, partition

    def replay(self, record: MetadataRecord, offset: int, controller_epoch: int | None = None) -> MetadataChange | None:
        """Apply one record at `offset` (written under `controller_epoch`, when known); returns what changed, or
        None when nothing a listener acts on did (a producer-id block)."""
        change = self._apply(record, offset)
        self.offset = offset
        if controller_epoch is not None and controller_epoch > self.controller_epoch:
            self.controller_epoch = controller_epoch
        return change

    def _apply(self, record: MetadataRecord, offset: int) -> MetadataChange | None:
        if isinstance(record, RegisterBrokerRecord):
            return self._register_broker(record)
        if isinstance(record, UnregisterBrokerRecord):
            self._registration(record.broker_id, record.broker_epoch, record)
            del self.brokers[record.broker_id]
            return MetadataChange(brokers={record.broker_id})
        if isinstance(record, FenceBrokerRecord):
            self._registration(record.id, record.epoch, record).fenced = True
            return MetadataChange(brokers={record.id})
        if isinstance(record, UnfenceBrokerRecord):
            self._registration(record.id, record.epoch, record).fenced = False
            return MetadataChange(brokers={record.id})
        if isinstance(record, BrokerRegistrationChangeRecord):
            broker = self._registration(record.broker_id, record.broker_epoch, record)
            if record.fenced in (FENCE, UNFENCE):
                broker.fenced = record.fenced == FENCE
            if record.in_controlled_shutdown == IN_CONTROLLED_SHUTDOWN:
                broker.in_controlled_shutdown = True
            return MetadataChange(brokers={record.broker_id})
        if isinstance(record, TopicRecord):
            return self._create_topic(record)
        if isinstance(record, PartitionRecord):
            topic = self._topic(record.topic_id, record)
            topic.partitions[record.partition_id] = PartitionInfo(
                replicas=list(record.replicas), isr=list(record.isr), leader=record.leader,
                leader_epoch=record.leader_epoch, partition_epoch=record.partition_epoch,
                removing_replicas=list(record.removing_replicas), adding_replicas=list(record.adding_replicas))
            return self._partition_changed(topic, record.partition_id)
        if isinstance(record, PartitionChangeRecord):
            topic = self._topic(record.topic_id, record)
            current = topic.partitions.get(record.partition_id)
            if current is None:
                raise MetadataReplayError(f"{record} changes a partition {topic.name} does not have")
            topic.partitions[record.partition_id] = current.merge(record)
            return self._partition_changed(topic, record.partition_id)
        if isinstance(record, RemoveTopicRecord):
            return self._remove_topic(record)
        if isinstance(record, ConfigRecord):
            return self._config(record)
        if isinstance(record, ClientQuotaRecord):
            self._client_quota(record)
            return None
        if isinstance(record, UserScramCredentialRecord):
            self.scram_credentials[(record.name, record.mechanism)] = credential_data(record)
            return None
        if isinstance(record, RemoveUserScramCredentialRecord):
            # As a broker's ScramDelta: removing what is not there leaves nothing to remove (the controller only
            # writes the removal of a credential it holds).
            self.scram_credentials.pop((record.name, record.mechanism), None)
            return None
        if isinstance(record, AccessControlEntryRecord):
            self.acls[record.id] = acl_of_record(record)
            self.acl_version += 1
            return None
        if isinstance(record, RemoveAccessControlEntryRecord):
            if self.acls.pop(record.id, None) is None:
                raise MetadataReplayError(f"{record} removes an ACL there is not")
            self.acl_version += 1
            return None
        if isinstance(record, ProducerIdsRecord):
            self.next_producer_id = record.next_producer_id
            return None
        if isinstance(record, FeatureLevelRecord):
            self.features[record.name] = record.feature_level
            # Past the default epoch whatever the offset (the first record of a log is at 0).
            self.features_epoch = DEFAULT_FEATURES_EPOCH + offset + 1
            return None
        raise MetadataReplayError(f"no replay rule for {type(record).__name__}")

    def _register_broker(self, record: RegisterBrokerRecord) -> MetadataChange:
        self.brokers[record.broker_id] = BrokerInfo(
            broker_id=record.broker_id,
            incarnation_id=record.incarnation_id,
            broker_epoch=record.broker_epoch,
            endpoints=[BrokerEndpointInfo(e.name, e.host, e.port, e.security_protocol) for e in record.end_points],
            rack=record.rack,
            fenced=record.fenced,
            in_controlled_shutdown=record.in_controlled_shutdown,
        )
        return MetadataChange(brokers={record.broker_id})

    def _registration(self, broker_id: int, broker_epoch: int, record: MetadataRecord) -> BrokerInfo:
        broker = self.brokers.get(broker_id)
        if broker is None or broker.broker_epoch != broker_epoch:
            raise MetadataReplayError(f"{record} names no registration of broker {broker_id} at epoch {broker_epoch}")
        return broker

    def _topic(self, topic_id: uuid.UUID, record: MetadataRecord) -> TopicInfo:
        topic = self.topics_by_id.get(topic_id)
        if topic is None:
            raise MetadataReplayError(f"{record} names unknown topic id {topic_id}")
        return topic

    def _create_topic(self, record: TopicRecord) -> MetadataChange:
        if record.name in self.topics or record.topic_id in self.topics_by_id:
            raise MetadataReplayError(f"{record} creates a topic that exists")
        topic = TopicInfo(record.name, record.topic_id)
        self.topics[topic.name] = topic
        self.topics_by_id[topic.topic_id] = topic
        return MetadataChange(topic_ids={topic.name: topic.topic_id})

    def _partition_changed(self, topic: TopicInfo, index: int) -> MetadataChange:
        return MetadataChange(partitions={(topic.name, index): topic.partitions[index]},
                              topic_ids={topic.name: topic.topic_id})

    def _remove_topic(self, record: RemoveTopicRecord) -> MetadataChange:
        topic = self._topic(record.topic_id, record)
        del self.topics[topic.name]
        del self.topics_by_id[topic.topic_id]
        self.topic_configs.pop(topic.name, None)  # a topic created again later starts from the defaults
        return MetadataChange(partitions={(topic.name, index): None for index in topic.partitions},
                              topic_ids={topic.name: topic.topic_id}, topic_configs={topic.name})

    def _client_quota(self, record: ClientQuotaRecord) -> None:
        entity = quota_entity((e.entity_type, e.entity_name) for e in record.entity)
        if record.remove:
            values = self.client_quotas.get(entity, {})
            values.pop(record.key, None)
            if not values:
                self.client_quotas.pop(entity, None)
        else:
            self.client_quotas.setdefault(entity, {})[record.key] = record.value

    def _config(self, record: ConfigRecord) -> MetadataChange | None:
        change: MetadataChange | None
        if record.resource_type == TOPIC_RESOURCE:
            table, change = self.topic_configs, MetadataChange(topic_configs={record.resource_name})
        elif record.resource_type == BROKER_RESOURCE:
            table, change = self.broker_configs, MetadataChange(broker_configs={record.resource_name})
        elif record.resource_type == GROUP_RESOURCE:
            table, change = self.group_configs, None  # read where used: nothing acts on a change
        else:  # other resources (client metrics) hold nothing this image serves
            return None
        entries = table.setdefault(record.resource_name, {})
        if record.value is None:
            entries.pop(record.name, None)
            if not entries:
                del table[record.resource_name]
        else:
            entries[record.name] = record.value
        return change
