"""The controller's metadata in ZooKeeper, in the znodes Kafka kept there (the ZooKeeper side of MetadataStore).

Each batch of records the quorum controller commits becomes ONE ZooKeeper multi-op behind a check of
/controller_epoch's version, so a deposed controller writes nothing (ControllerMovedError; every later append
fails the same way, and the controller resigns):
- TopicRecord + its PartitionRecords: /brokers/topics/<t> (assignment and topic id), its partition znodes and each
  .../partitions/<p>/state (leader, leader epoch, ISR, controller epoch) at version 0 = partition epoch 0, and
  /config/topics/<t>;
- PartitionRecords of an existing topic (CreatePartitions): /brokers/topics/<t> set to the grown assignment and
  the new partitions' znodes;
- PartitionChangeRecord: the state znode set conditionally on the partition epoch before the change, so the znode
  version IS the partition epoch; one that changes the replicas or an ongoing reassignment (KIP-455) also sets
  /brokers/topics/<t>, whose "adding_replicas"/"removing_replicas" maps hold it (read back on failover, so a new
  controller resumes it);
- ConfigRecord: /config/topics/<t> holds the topic's new overrides, and for an existing topic a change notification
  /config/changes/config_change_<seq> tells the brokers, as Kafka's admin does;
- ConfigRecord of a BROKER resource (dynamic broker configs): /config/brokers/<id> or /config/brokers/<default> and
  a change notification naming it (see zk_broker_configs);
- RemoveTopicRecord: only /admin/delete_topics/<t> is created; the topic's znodes, its config and that mark are
  deleted by `complete_topic_deletion` once every replica answered StopReplica (topic_deletion_manager.py), so a
  controller taking over before that finds the mark and the topic and finishes the deletion;
- ProducerIdsRecord: /latest_producer_id_block, conditionally on the version last read or written.
- ClientQuotaRecord: the entity's config znode (/config/users/..., /config/clients/..., see zk_client_quotas) and
  a change notification naming the entity's path.
- UserScramCredentialRecord / RemoveUserScramCredentialRecord: the user's config znode /config/users/<user>, its
  quotas kept (see zk_scram_credentials), and a change notification naming `users/<user>`.
- AccessControlEntryRecord / RemoveAccessControlEntryRecord: the resource pattern's /kafka-acl... znode holds its
  ACLs, and an acl_changes_ notification names the pattern (see zk_acls).
- FeatureLevelRecord: /feature holds every finalized feature at its new level (Kafka's FeatureZNode; a feature at 0
  left out), which brokers watch; a cluster without it is at the default levels.
Broker records are not written: the ephemeral /brokers/ids/<id> znodes are the truth, and the controller only
replays what it synthesises from them. Offsets are a count of the records this controller committed: nothing
fetches them.
"""
from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kazoo.exceptions import KazooException

from minikafka.broker.metadata.acls import acl_records
from minikafka.broker.metadata.features import finalized_levels, levels_of_listing
from minikafka.broker.metadata.metadata_image import TOPIC_RESOURCE, MetadataImage, PartitionInfo
from minikafka.broker.metadata.scram_credentials import credential_records
from minikafka.broker.zk.kafka_zk_client import (
    ControllerMovedError,
    CreateOp,
    DeleteOp,
    KafkaZkClient,
    SetDataOp,
    ZkWrite,
)
from minikafka.broker.zk.zk_acls import acl_record_writes, read_acls
from minikafka.broker.zk.zk_broker_configs import (
    broker_config_record_writes,
    broker_config_records,
    read_broker_configs,
)
from minikafka.broker.zk.zk_client_quotas import client_quota_record_writes, client_quota_records, read_client_quotas
from minikafka.broker.zk.zk_data import (
    CONFIG_CHANGES_PATH,
    FEATURE_PATH,
    PRODUCER_ID_BLOCK_PATH,
    RECOVERED,
    TOPIC_CONFIG,
    UNKNOWN_VERSION,
    BrokerRegistration,
    LeaderIsrAndControllerEpoch,
    ProducerIdsBlock,
    ReplicaAssignment,
    config_entity_path,
    decode_producer_id_block,
    delete_topic_path,
    encode_config,
    encode_feature_znode,
    encode_producer_id_block,
    encode_topic,
    encode_topic_partition_state,
    topic_partition_path,
    topic_partition_state_path,
    topic_partitions_path,
    topic_path,
)
from minikafka.broker.zk.zk_scram_credentials import read_scram_credentials, scram_credential_record_writes
from minikafka.protocol.metadata_records import (
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from minikafka.storage.metadata_log import MetadataEntry

log = logging.getLogger("minikafka.controller")

CONFIG_CHANGE_PREFIX = f"{CONFIG_CHANGES_PATH}/config_change_"  # ZooKeeper appends the 10-digit sequence
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}  # Kafka's SecurityProtocol


def encode_config_change(entity_type: str, entity_name: str) -> bytes:
    """A config change notification as Kafka's admin writes it (version 2: the entity's path)."""
    return json.dumps({"version": 2, "entity_path": f"{entity_type}/{entity_name}"}).encode()


def register_broker_record(broker_id: int, broker_epoch: int, registration: BrokerRegistration) -> RegisterBrokerRecord:
    """The image's record of a live broker (never written: ZooKeeper keeps it), unfenced."""
    return RegisterBrokerRecord(
        broker_id=broker_id, is_migrating_zk_broker=False, incarnation_id=uuid.UUID(int=0), broker_epoch=broker_epoch,
        end_points=[RegisterBrokerRecord.BrokerEndpoint(
            name=e.listener_name, host=e.host, port=e.port,
            security_protocol=SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0)) for e in registration.endpoints],
        features=[], rack=registration.rack, fenced=False, in_controlled_shutdown=False)


def _replica_assignment(partition: PartitionInfo) -> ReplicaAssignment:
    """The topic znode's view of a partition: its replicas, with an ongoing reassignment's adding and removing."""
    return ReplicaAssignment(tuple(partition.replicas), tuple(partition.adding_replicas),
                             tuple(partition.removing_replicas))


def _assignment_of(partitions: dict[int, PartitionInfo]) -> dict[int, ReplicaAssignment]:
    return {index: _replica_assignment(p) for index, p in partitions.items()}


class ZkMetadataStore:
    """`await read_state()` once elected, then hand it to a QuorumController (which replays `load()`)."""

    def __init__(self, zk: KafkaZkClient, controller_epoch: int, epoch_zk_version: int, image: MetadataImage,
                 on_controller_moved: Callable[[], None] | None = None) -> None:
        """`image` is the one the controller replays into: a batch is translated against the state before it."""
        self._zk = zk
        self._controller_epoch = controller_epoch
        self._epoch_zk_version = epoch_zk_version
        self._image = image
        self._on_controller_moved = on_controller_moved
        self._loaded: list[MetadataRecord] = []
        self._end_offset = 0
        self._producer_id_block_version = UNKNOWN_VERSION
        self.deposed = False
        self.state_unknown = False  # deposed because a write failed in a way that leaves its state in doubt
        self.pending_deletions: list[str] = []  # topics marked for deletion when the state was read
        self.stale_deletion_marks: list[str] = []  # marks of topics already gone when the state was read
        self._marked: set[str] = set()  # deleted topics whose znodes remain until their replicas are deleted

    @property
    def controller_epoch(self) -> int:
        return self._controller_epoch

    @property
    def epoch_zk_version(self) -> int:
        return self._epoch_zk_version

    @property
    def end_offset(self) -> int:
        return self._end_offset

    @property
    def marked_for_deletion(self) -> set[str]:
        return self._marked

    def close(self) -> None:
        self._loaded = []

    # ---- loading ----------------------------------------------------------------------------------------------

    async def read_state(self) -> None:
        """Read everything a controller taking over needs: live brokers (broker epoch = czxid), topics with ids
        and assignments, partition states (partition epoch = znode version), topic configs, the producer-id
        block, client quotas, dynamic broker configs and SCRAM credentials. A topic without an id gets one,
        written back."""
        zk = self._zk
        records: list[MetadataRecord] = []
        brokers = await zk.get_all_broker_and_epochs_in_cluster()
        records += [register_broker_record(broker_id, b.epoch, b.broker) for broker_id, b in sorted(brokers.items())]
        topics = sorted(await zk.get_all_topics_in_cluster())
        assignments = await zk.get_replica_assignment_and_topic_id_for_topics(topics)
        states = await zk.get_topic_partition_states(
            [(t, p) for t, a in assignments.items() for p in a.partitions])
        configs = await zk.get_topic_configs(list(assignments))
        for topic, assignment in sorted(assignments.items()):
            topic_id = assignment.topic_id
            if topic_id is None:
                topic_id = uuid.uuid4()
                await zk.set_topic_assignment(topic, topic_id, assignment.partitions, self._epoch_zk_version)
                log.info("topic %s had no topic id: gave it %s", topic, topic_id)
            records.append(TopicRecord(name=topic, topic_id=topic_id))
            records += [ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=topic, name=name, value=value)
                        for name, value in sorted(configs.get(topic, {}).items())]
            for index, replicas in sorted(assignment.partitions.items()):
                state = states.get((topic, index))
                if state is None:
                    state = await self._initialize_partition(topic, index, replicas.replicas, set(brokers))
                    if state is None:
                        continue
                records.append(PartitionRecord(
                    version=0, partition_id=index, topic_id=topic_id, replicas=list(replicas.replicas),
                    isr=list(state.isr), removing_replicas=list(replicas.removing_replicas),
                    adding_replicas=list(replicas.adding_replicas), leader=state.leader,
                    leader_recovery_state=state.leader_recovery_state, leader_epoch=state.leader_epoch,
                    partition_epoch=state.partition_epoch))
        data, version = await zk.get_data_and_version(PRODUCER_ID_BLOCK_PATH)
        self._producer_id_block_version = version
        if data:
            block = decode_producer_id_block(data)
            records.append(ProducerIdsRecord(broker_id=block.assigned_broker_id, broker_epoch=-1,
                                             next_producer_id=block.next_block_first_id))
        records += client_quota_records(await read_client_quotas(zk))
        records += credential_records(await read_scram_credentials(zk))
        records += acl_records(await read_acls(zk))
        records += broker_config_records(await read_broker_configs(zk))
        listed, _version = await zk.get_feature_levels()
        if listed is not None:
            records += [FeatureLevelRecord(name=name, feature_level=level)
                        for name, level in sorted(levels_of_listing(listed).items())]
        marks = set(await zk.get_topic_deletions(watch=False))
        self.pending_deletions = sorted(marks & set(assignments))
        self.stale_deletion_marks = sorted(marks - set(assignments))
        self._marked = set(marks)
        self._loaded = records
        self._end_offset = len(records)

    async def _initialize_partition(self, topic: str, index: int, replicas: Sequence[int],
                                    live: set[int]) -> LeaderIsrAndControllerEpoch | None:
        """The first state of a partition assigned without one (a creation cut short, or a topic written to
        ZooKeeper by an admin tool): the live replicas are the ISR, the first of them leads (Kafka's
        initializeLeaderAndIsrForPartitions). None, and the partition left out, while no replica is live."""
        isr = tuple(r for r in replicas if r in live)
        if not isr:
            log.warning("partition %s-%d has no state znode and no live replica: left out", topic, index)
            return None
        state = LeaderIsrAndControllerEpoch(isr[0], 0, isr, self._controller_epoch)
        parents = [topic_partitions_path(topic), topic_partition_path(topic, index)]
        there = await self._zk.existing(parents)
        ops: list[ZkWrite] = [CreateOp(path, b"") for path in parents if path not in there]
        ops.append(CreateOp(topic_partition_state_path(topic, index), encode_topic_partition_state(state)))
        await self._write(ops)
        log.info("partition %s-%d had no state znode: leader %d, ISR %s", topic, index, state.leader, list(isr))
        return state

    def load(self) -> Iterator[MetadataEntry]:
        for offset, record in enumerate(self._loaded):
            yield MetadataEntry(offset, self._controller_epoch, record)

    # ---- writing ----------------------------------------------------------------------------------------------

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        if self.deposed:
            raise ControllerMovedError(f"controller epoch {self._controller_epoch} was superseded")
        ops, removed, producer_id_block_index = await self._translate(records)
        if ops:
            results = await self._write(ops)
            if producer_id_block_index is not None:
                written = results[producer_id_block_index]
                self._producer_id_block_version = written.version if not isinstance(written, str) else 0
        self._marked.update(removed)
        self._end_offset += len(records)
        return self._end_offset - 1

    async def complete_topic_deletion(self, name: str) -> None:
        """Delete a topic's znodes, config and deletion mark (those still there), behind the controller epoch."""
        await self._write(await self._topic_deletion(name))
        self._marked.discard(name)

    async def _write(self, ops: list[ZkWrite]) -> list[Any]:
        """`ops` as one multi-op behind the epoch check. A refusal deposes this controller. Any other failure
        (a NODEEXISTS or BADVERSION when a write whose answer was lost is sent again, a znode changed behind the
        controller's back) means its image no longer matches ZooKeeper: it is deposed too, with `state_unknown`,
        so that it gives up /controller and whoever wins reads ZooKeeper afresh (Kafka's triggerControllerMove)."""
        if self.deposed:
            raise ControllerMovedError(f"controller epoch {self._controller_epoch} was superseded")
        try:
            return await self._zk.multi(ops, self._epoch_zk_version)
        except ControllerMovedError:
            log.warning("controller epoch %d was superseded: its ZooKeeper write was refused", self._controller_epoch)
            self._depose()
            raise
        except KazooException as exc:
            log.error("controller epoch %d: a ZooKeeper write failed (%s): its state no longer matches ZooKeeper, "
                      "it moves the controller", self._controller_epoch, type(exc).__name__)
            self.state_unknown = True
            self._depose()
            raise ControllerMovedError(f"ZooKeeper write failed: {type(exc).__name__}") from exc

    def _depose(self) -> None:
        self.deposed = True
        if self._on_controller_moved is not None:
            self._on_controller_moved()

    async def _translate(self, records: Sequence[MetadataRecord]) -> tuple[list[ZkWrite], list[str], int | None]:
        """(the batch's writes, the topics it marks for deletion, the index of the producer-id block write among
        the writes)."""
        image = self._image
        new_topics: dict[uuid.UUID, str] = {}
        # topics created, grown or reassigned: their whole assignment
        assignments: dict[str, dict[int, ReplicaAssignment]] = {}
        new_partitions: list[tuple[str, int, LeaderIsrAndControllerEpoch]] = []
        changed: dict[tuple[str, int], tuple[PartitionInfo, int]] = {}  # state after, version before
        configs: dict[str, dict[str, str]] = {}
        removed: list[str] = []
        ops: list[ZkWrite] = []
        producer_id_block: int | None = None
        for record in records:
            if isinstance(record, TopicRecord):
                new_topics[record.topic_id] = record.name
                assignments[record.name] = {}
                configs.setdefault(record.name, {})
            elif isinstance(record, PartitionRecord):
                name = new_topics.get(record.topic_id) or image.topics_by_id[record.topic_id].name
                if name not in assignments:
                    assignments[name] = _assignment_of(image.topics[name].partitions)
                assignments[name][record.partition_id] = ReplicaAssignment(tuple(record.replicas))
                new_partitions.append((name, record.partition_id, LeaderIsrAndControllerEpoch(
                    record.leader, record.leader_epoch, tuple(record.isr), self._controller_epoch,
                    record.leader_recovery_state, 0)))
            elif isinstance(record, PartitionChangeRecord):
                topic = image.topics_by_id[record.topic_id]
                key = (topic.name, record.partition_id)
                before, version = changed.get(key) or (topic.partitions[record.partition_id],
                                                       topic.partitions[record.partition_id].partition_epoch)
                changed[key] = (before.merge(record), version)
                if record.replicas is not None or record.removing_replicas is not None \
                        or record.adding_replicas is not None:  # a reassignment: the topic znode holds it
                    topic_assignment = assignments.setdefault(topic.name, _assignment_of(topic.partitions))
                    topic_assignment[record.partition_id] = _replica_assignment(changed[key][0])
            elif isinstance(record, ConfigRecord):
                if record.resource_type != TOPIC_RESOURCE:
                    continue
                current = configs.setdefault(record.resource_name,
                                             dict(image.topic_configs.get(record.resource_name, {})))
                if record.value is None:
                    current.pop(record.name, None)
                else:
                    current[record.name] = record.value
            elif isinstance(record, RemoveTopicRecord):
                removed.append(image.topics_by_id[record.topic_id].name)
            elif isinstance(record, ProducerIdsRecord):
                first = image.next_producer_id
                data = encode_producer_id_block(ProducerIdsBlock(record.broker_id, first,
                                                                 record.next_producer_id - first))
                producer_id_block = len(ops)
                ops.append(CreateOp(PRODUCER_ID_BLOCK_PATH, data)
                           if self._producer_id_block_version == UNKNOWN_VERSION
                           else SetDataOp(PRODUCER_ID_BLOCK_PATH, data, self._producer_id_block_version))
            # broker records: ZooKeeper's /brokers/ids is their truth; nothing to write
        for name, assignment in assignments.items():
            data = encode_topic(image.topics[name].topic_id if name in image.topics else
                                next(i for i, n in new_topics.items() if n == name),
                                dict(sorted(assignment.items())))
            if name in image.topics:
                ops.append(SetDataOp(topic_path(name), data))
            else:
                ops += [CreateOp(topic_path(name), data), CreateOp(topic_partitions_path(name), b"")]
        for name, index, state in new_partitions:
            ops += [CreateOp(topic_partition_path(name, index), b""),
                    CreateOp(topic_partition_state_path(name, index), encode_topic_partition_state(state))]
        for (name, index), (after, version) in changed.items():
            state = LeaderIsrAndControllerEpoch(after.leader, after.leader_epoch, tuple(after.isr),
                                                self._controller_epoch, RECOVERED)
            ops.append(SetDataOp(topic_partition_state_path(name, index), encode_topic_partition_state(state),
                                 version))
        for name, config in configs.items():
            path = config_entity_path(TOPIC_CONFIG, name)
            if name not in image.topics:
                ops.append(CreateOp(path, encode_config(config)))
                continue
            if await self._zk.path_exists(path):
                ops.append(SetDataOp(path, encode_config(config)))
            else:
                ops.append(CreateOp(path, encode_config(config)))
            ops.append(CreateOp(CONFIG_CHANGE_PREFIX, encode_config_change(TOPIC_CONFIG, name), sequential=True))
        ops += await client_quota_record_writes(self._zk, image.client_quotas, records)
        ops += await scram_credential_record_writes(self._zk, image.scram_credentials, records)
        ops += await acl_record_writes(self._zk, image.acls, records)
        ops += await broker_config_record_writes(self._zk, image.broker_configs, records)
        features = {r.name: r.feature_level for r in records if isinstance(r, FeatureLevelRecord)}
        if features:
            data = encode_feature_znode(finalized_levels({**image.features, **features}))
            ops.append(SetDataOp(FEATURE_PATH, data) if await self._zk.path_exists(FEATURE_PATH)
                       else CreateOp(FEATURE_PATH, data))
        for name in removed:
            if name not in self._marked and not await self._zk.path_exists(delete_topic_path(name)):
                ops.append(CreateOp(delete_topic_path(name), b""))
        return ops, removed, producer_id_block

    async def _topic_deletion(self, name: str) -> list[ZkWrite]:
        """The deletes removing what is left of a topic's znodes, its config and its deletion mark, children
        first (read from ZooKeeper: a deletion may have been half done by an earlier controller)."""
        indexes = sorted(int(child) for child in await self._zk.get_children(topic_partitions_path(name)))
        paths = [path for index in indexes
                 for path in (topic_partition_state_path(name, index), topic_partition_path(name, index))]
        paths += [topic_partitions_path(name), topic_path(name), config_entity_path(TOPIC_CONFIG, name),
                  delete_topic_path(name)]
        return [DeleteOp(path) for path in await self._zk.existing(paths)]

