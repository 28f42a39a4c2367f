"""The metadata image: every metadata record type replays into the state Kafka's image holds, and says what changed."""
from __future__ import annotations

import uuid

import pytest

from minikafka.broker.metadata.metadata_image import (
    BrokerEndpointInfo,
    MetadataChange,
    MetadataImage,
    MetadataReplayError,
    PartitionInfo,
)
from minikafka.broker.metadata.scram_credentials import SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential
from minikafka.protocol.metadata_records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)

ORDERS = uuid.UUID("6b1d3a4e-2f0c-4c59-9a57-0e3c1f2d8a10")
TOPIC, BROKER = 2, 4


def register(broker_id: int, epoch: int, incarnation: int = 1, fenced: bool = True) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=uuid.UUID(int=incarnation), broker_epoch=epoch,
        end_points=[RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9090 + broker_id,
                                                        security_protocol=0)],
        features=[], rack="r1", fenced=fenced, in_controlled_shutdown=False)


def orders(replicas: list[int], isr: list[int], leader: int, index: int = 0) -> list:
    return [TopicRecord(name="orders", topic_id=ORDERS),
            PartitionRecord(partition_id=index, topic_id=ORDERS, replicas=replicas, isr=isr, removing_replicas=[],
                            adding_replicas=[], leader=leader, leader_epoch=0, partition_epoch=0)]


def replay_all(image: MetadataImage, records: list, first_offset: int = 0) -> MetadataChange:
    change = MetadataChange()
    for offset, record in enumerate(records, first_offset):
        step = image.replay(record, offset)
        if step is not None:
            change.merge(step)
    return change


def test_registration_fencing_and_unregistration() -> None:
    image = MetadataImage()
    change = image.replay(register(1, epoch=0), 0)
    assert change == MetadataChange(brokers={1})
    broker = image.brokers[1]
    assert (broker.broker_epoch, broker.fenced, broker.rack, broker.incarnation_id) == (0, True, "r1", uuid.UUID(int=1))
    assert broker.endpoint("PLAINTEXT") == BrokerEndpointInfo("PLAINTEXT", "127.0.0.1", 9091, 0)
    assert image.live_brokers() == [] and not image.is_active(1)

    image.replay(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=0, fenced=-1), 1)
    assert image.live_brokers() == [broker] and image.is_active(1)
    image.replay(BrokerRegistrationChangeRecord(version=1, broker_id=1, broker_epoch=0, in_controlled_shutdown=1), 2)
    assert broker.in_controlled_shutdown and not broker.fenced and not image.is_active(1)
    image.replay(FenceBrokerRecord(id=1, epoch=0), 3)
    assert broker.fenced and broker.in_controlled_shutdown
    image.replay(register(1, epoch=4, incarnation=2), 4)  # a restart: a new registration replaces the old one
    assert image.brokers[1].broker_epoch == 4 and not image.brokers[1].in_controlled_shutdown
    image.replay(UnfenceBrokerRecord(id=1, epoch=4), 5)
    assert not image.brokers[1].fenced
    image.replay(UnregisterBrokerRecord(broker_id=1, broker_epoch=4), 6)
    assert image.brokers == {} and image.offset == 6


def test_a_change_to_another_registration_epoch_is_refused() -> None:
    image = MetadataImage()
    image.replay(register(1, epoch=0), 0)
    with pytest.raises(MetadataReplayError):
        image.replay(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=7, fenced=1), 1)
    with pytest.raises(MetadataReplayError):
        image.replay(FenceBrokerRecord(id=2, epoch=0), 1)


def test_partition_changes_bump_epochs_as_kafka_merges_them() -> None:
    image = MetadataImage()
    change = replay_all(image, orders([1, 2, 3], [1, 2, 3], leader=1))
    assert change.partitions == {("orders", 0): PartitionInfo([1, 2, 3], [1, 2, 3], 1, 0, 0)}
    assert change.topic_ids == {"orders": ORDERS}

    image.replay(PartitionChangeRecord(partition_id=0, topic_id=ORDERS, isr=[1, 2]), 2)  # ISR only
    assert image.topics["orders"].partitions[0] == PartitionInfo([1, 2, 3], [1, 2], 1, 0, 1)
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=ORDERS, leader=2, isr=[2]), 3)
    assert image.topics["orders"].partitions[0] == PartitionInfo([1, 2, 3], [2], 2, 1, 2)
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=ORDERS, leader=-1), 4)  # offline
    assert image.topics["orders"].partitions[0] == PartitionInfo([1, 2, 3], [2], -1, 2, 3)
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=ORDERS, replicas=[2, 3]), 5)
    assert image.topics_by_id[ORDERS].partitions[0] == PartitionInfo([2, 3], [2], -1, 2, 4)
    assert image.topics_by_id[ORDERS] is image.topics["orders"]


def test_records_for_unknown_topics_or_partitions_are_refused() -> None:
    image = MetadataImage()
    with pytest.raises(MetadataReplayError):
        image.replay(PartitionChangeRecord(partition_id=0, topic_id=ORDERS, leader=1), 0)
    replay_all(image, orders([1], [1], leader=1))
    with pytest.raises(MetadataReplayError):
        image.replay(PartitionChangeRecord(partition_id=5, topic_id=ORDERS, leader=1), 2)
    with pytest.raises(MetadataReplayError):
        image.replay(TopicRecord(name="orders", topic_id=uuid.UUID(int=9)), 2)


def test_topic_removal_drops_partitions_and_configs() -> None:
    image = MetadataImage()
    replay_all(image, [*orders([1], [1], leader=1), PartitionRecord(
        partition_id=1, topic_id=ORDERS, replicas=[1], isr=[1], removing_replicas=[], adding_replicas=[], leader=1,
        leader_epoch=0, partition_epoch=0),
        ConfigRecord(resource_type=TOPIC, resource_name="orders", name="retention.ms", value="1000")])
    assert image.topic_configs == {"orders": {"retention.ms": "1000"}}
    change = image.replay(RemoveTopicRecord(topic_id=ORDERS), 9)
    assert change == MetadataChange(partitions={("orders", 0): None, ("orders", 1): None},
                                    topic_ids={"orders": ORDERS}, topic_configs={"orders"})
    assert image.topics == {} and image.topics_by_id == {} and image.topic_configs == {}


def test_config_records_set_and_delete_entries() -> None:
    image = MetadataImage()
    assert image.replay(ConfigRecord(resource_type=BROKER, resource_name="", name="unclean.leader.election.enable",
                                     value="true"), 0) == MetadataChange(broker_configs={""})
    image.replay(ConfigRecord(resource_type=TOPIC, resource_name="orders", name="cleanup.policy", value="compact"), 1)
    image.replay(ConfigRecord(resource_type=TOPIC, resource_name="orders", name="retention.ms", value="5"), 2)
    assert image.replay(ConfigRecord(resource_type=TOPIC, resource_name="orders", name="cleanup.policy",
                                     value=None), 3) == MetadataChange(topic_configs={"orders"})
    assert image.topic_configs == {"orders": {"retention.ms": "5"}}
    assert image.broker_configs == {"": {"unclean.leader.election.enable": "true"}}
    image.replay(ConfigRecord(resource_type=TOPIC, resource_name="orders", name="retention.ms", value=None), 4)
    assert image.topic_configs == {}
    assert image.replay(ConfigRecord(resource_type=16, resource_name="m", name="x", value="y"), 5) is None


def test_producer_id_blocks_and_controller_epoch() -> None:
    image = MetadataImage()
    assert image.replay(ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=1000), 0,
                        controller_epoch=3) is None
    image.replay(ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=2000), 1, controller_epoch=2)
    assert (image.next_producer_id, image.offset, image.controller_epoch) == (2000, 1, 3)


def test_scram_credential_records_create_replace_and_remove_credentials() -> None:
    def upsert(user: str, mechanism: int, key: bytes, iterations: int = 4096) -> UserScramCredentialRecord:
        return UserScramCredentialRecord(name=user, mechanism=mechanism, salt=b"salt-" + key, stored_key=b"st-" + key,
                                         server_key=b"sv-" + key, iterations=iterations)

    image = MetadataImage()
    assert image.replay(upsert("alice", SCRAM_SHA_256, b"1"), 0) is None
    image.replay(upsert("alice", SCRAM_SHA_512, b"2", 8192), 1)
    image.replay(upsert("bob", SCRAM_SHA_256, b"3"), 2)
    image.replay(upsert("alice", SCRAM_SHA_256, b"4", 5000), 3)  # replaced
    assert image.scram_credentials == {
        ("alice", SCRAM_SHA_256): ScramCredential(b"salt-4", b"st-4", b"sv-4", 5000),
        ("alice", SCRAM_SHA_512): ScramCredential(b"salt-2", b"st-2", b"sv-2", 8192),
        ("bob", SCRAM_SHA_256): ScramCredential(b"salt-3", b"st-3", b"sv-3", 4096),
    }
    assert "st-4" not in repr(image.scram_credentials[("alice", SCRAM_SHA_256)])  # keys stay out of logs
    held = image.scram_credentials
    assert image.replay(RemoveUserScramCredentialRecord(name="alice", mechanism=SCRAM_SHA_256), 4) is None
    image.replay(RemoveUserScramCredentialRecord(name="carol", mechanism=SCRAM_SHA_256), 5)  # nothing to remove
    assert sorted(held) == [("alice", SCRAM_SHA_512), ("bob", SCRAM_SHA_256)]
    assert image.scram_credentials is held and image.offset == 5


def test_the_same_records_build_the_same_image() -> None:
    records = [register(1, 0), register(2, 1), BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=0, fenced=-1),
               *orders([1, 2], [1, 2], leader=1),
               PartitionChangeRecord(partition_id=0, topic_id=ORDERS, isr=[1]),
               ConfigRecord(resource_type=TOPIC, resource_name="orders", name="min.insync.replicas", value="2"),
               UserScramCredentialRecord(name="u", mechanism=SCRAM_SHA_512, salt=b"s", stored_key=b"k",
                                         server_key=b"v", iterations=4096)]
    first, second = MetadataImage(), MetadataImage()
    replay_all(first, records)
    replay_all(second, records)
    assert first == second and first.offset == len(records) - 1
