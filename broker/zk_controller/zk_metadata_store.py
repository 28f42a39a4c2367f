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
  version IS the partition epoch;
- ConfigRecord: /config/topics/<t> holds the topic's new overrides, and for an existing topic a change notification
  /config/changes/config_change_<seq> tells the brokers, as Kafka's admin does;
- RemoveTopicRecord: /admin/delete_topics/<t> is created first (its own multi-op), then the topic's znodes, its
  config and that mark are deleted: a controller taking over between the two finishes the deletion;
- ProducerIdsRecord: /latest_producer_id_block, conditionally on the version last read or written.
Broker records are not written: the ephemeral /brokers/ids/<id> znodes are the truth, and the controller only
replays what it synthesises from them. Offsets are a count of the records this controller committed: nothing
fetches them.
"""
from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence

from minikafka.protocol.metadata_records import (
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from minikafka.storage.metadata_log import MetadataEntry

from ..metadata_image import TOPIC_RESOURCE, MetadataImage, PartitionInfo
from ..zk.kafka_zk_client import (
    ControllerMovedError,
    CreateOp,
    DeleteOp,
    KafkaZkClient,
    SetDataOp,
    ZkWrite,
)
from ..zk.zk_data import (
    CONFIG_CHANGES_PATH,
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
    encode_producer_id_block,
    encode_topic,
    encode_topic_partition_state,
    topic_partition_path,
    topic_partition_state_path,
    topic_partitions_path,
    topic_path,
)

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
        self.pending_deletions: list[str] = []  # topics marked for deletion when the state was read

    @property
    def controller_epoch(self) -> int:
        return self._controller_epoch

    @property
    def epoch_zk_version(self) -> int:
        return self._epoch_zk_version

    @property
    def end_offset(self) -> int:
        return self._end_offset

    def close(self) -> None:
        self._loaded = []

    # ---- loading ----------------------------------------------------------------------------------------------

    async def read_state(self) -> None:
        """Read everything a controller taking over needs: live brokers (broker epoch = czxid), topics with ids
        and assignments, partition states (partition epoch = znode version), topic configs and the producer-id
        block. A topic without an id gets one, written back."""
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
                    log.warning("partition %s-%d has no state znode: left out until it is created", topic, index)
                    continue
                records.append(PartitionRecord(
                    version=0, partition_id=index, topic_id=topic_id, replicas=list(replicas.replicas),
                    isr=list(state.isr), removing_replicas=[], adding_replicas=[], leader=state.leader,
                    leader_recovery_state=state.leader_recovery_state, leader_epoch=state.leader_epoch,
                    partition_epoch=state.partition_epoch))
        data, version = await zk.get_data_and_version(PRODUCER_ID_BLOCK_PATH)
        self._producer_id_block_version = version
        if data:
            block = decode_producer_id_block(data)
            records.append(ProducerIdsRecord(broker_id=block.assigned_broker_id, broker_epoch=-1,
                                             next_producer_id=block.next_block_first_id))
        self.pending_deletions = sorted(set(await zk.get_topic_deletions(watch=False)) & set(assignments))
        self._loaded = records
        self._end_offset = len(records)

    def load(self) -> Iterator[MetadataEntry]:
        for offset, record in enumerate(self._loaded):
            yield MetadataEntry(offset, self._controller_epoch, record)

    # ---- writing ----------------------------------------------------------------------------------------------

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        if self.deposed:
            raise ControllerMovedError(f"controller epoch {self._controller_epoch} was superseded")
        ops, marks, producer_id_block_index = await self._translate(records)
        try:
            if marks:
                await self._zk.multi(marks, self._epoch_zk_version)
            if ops:
                results = await self._zk.multi(ops, self._epoch_zk_version)
                if producer_id_block_index is not None:
                    written = results[producer_id_block_index]
                    self._producer_id_block_version = written.version if not isinstance(written, str) else 0
        except ControllerMovedError:
            self.deposed = True
            log.warning("controller epoch %d was superseded: its ZooKeeper write was refused", self._controller_epoch)
            if self._on_controller_moved is not None:
                self._on_controller_moved()
            raise
        self._end_offset += len(records)
        return self._end_offset - 1

    async def _translate(self, records: Sequence[MetadataRecord]) -> tuple[list[ZkWrite], list[ZkWrite], int | None]:
        """(the batch's writes, the deletion marks to write before them, the index of the producer-id block
        write among the writes)."""
        image = self._image
        new_topics: dict[uuid.UUID, str] = {}
        assignments: dict[str, dict[int, list[int]]] = {}  # topics created or grown: their whole assignment
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
                    assignments[name] = {i: list(p.replicas) for i, p in image.topics[name].partitions.items()}
                assignments[name][record.partition_id] = list(record.replicas)
                new_partitions.append((name, record.partition_id, LeaderIsrAndControllerEpoch(
                    record.leader, record.leader_epoch, tuple(record.isr), self._controller_epoch,
                    record.leader_recovery_state, 0)))
            elif isinstance(record, PartitionChangeRecord):
                topic = image.topics_by_id[record.topic_id]
                key = (topic.name, record.partition_id)
                before, version = changed.get(key) or (topic.partitions[record.partition_id],
                                                       topic.partitions[record.partition_id].partition_epoch)
                changed[key] = (before.merge(record), version)
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
                                {i: ReplicaAssignment(tuple(r)) for i, r in sorted(assignment.items())})
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
        marks: list[ZkWrite] = []
        for name in removed:
            if not await self._zk.path_exists(delete_topic_path(name)):
                marks.append(CreateOp(delete_topic_path(name), b""))
            ops += await self._topic_deletion(name)
        return ops, marks, producer_id_block

    async def _topic_deletion(self, name: str) -> list[ZkWrite]:
        """The deletes removing a topic's znodes, config and deletion mark, children first."""
        topic = self._image.topics[name]
        deletes: list[ZkWrite] = []
        for index in sorted(topic.partitions):
            deletes += [DeleteOp(topic_partition_state_path(name, index)), DeleteOp(topic_partition_path(name, index))]
        deletes += [DeleteOp(topic_partitions_path(name)), DeleteOp(topic_path(name))]
        if await self._zk.path_exists(config_entity_path(TOPIC_CONFIG, name)):
            deletes.append(DeleteOp(config_entity_path(TOPIC_CONFIG, name)))
        deletes.append(DeleteOp(delete_topic_path(name)))
        return deletes

