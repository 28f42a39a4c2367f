"""Metadata responses assembled from topic entries encoded once per metadata image are, byte for byte, what
encoding the whole response gives, for every version and kind of request; a change of the image shows at once."""
from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
import trio
from kafka.protocol.metadata.metadata import MetadataRequest

from minikafka.broker.metadata.metadata_cache import MetadataCache
from minikafka.broker.metadata.metadata_image import MetadataImage
from minikafka.broker.network.request_channel import Request, RequestKind
from minikafka.broker.network.socket_server import ConnectionInfo
from minikafka.broker.server.broker_services import RequestContext
from minikafka.broker.server.handlers.metadata import EncodedTopics, handle_metadata
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS, encode_response
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.metadata_records import (
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from minikafka.protocol.request_header import RequestHeader

SCHEMA = SCHEMAS[ApiKey.METADATA]
ORDERS = uuid.UUID(int=11)
EVENTS = uuid.UUID(int=12)
OFFSETS = uuid.UUID(int=13)
UNKNOWN = uuid.UUID(int=99)


def register(broker_id: int, listeners: tuple[str, ...] = ("PLAINTEXT",)) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=uuid.UUID(int=broker_id), broker_epoch=broker_id,
        end_points=[RegisterBrokerRecord.BrokerEndpoint(name=name, host="127.0.0.1", port=9090 + broker_id,
                                                        security_protocol=0) for name in listeners],
        features=[], rack="r1", fenced=False, in_controlled_shutdown=False)


def partition(topic_id: uuid.UUID, index: int, replicas: list[int], leader: int) -> PartitionRecord:
    return PartitionRecord(partition_id=index, topic_id=topic_id, replicas=replicas, isr=list(replicas),
                           removing_replicas=[], adding_replicas=[], leader=leader, leader_epoch=3, partition_epoch=0)


def image() -> MetadataImage:
    """Broker 1 serves (the only live one, so the controller id is not a draw); broker 2 is fenced; broker 3 is
    fenced and lacks the listener; the partitions show every state a client can be told of: led here, led by a
    fenced broker, led by one without the listener, without a leader."""
    records = [
        register(1), register(2), register(3, listeners=("INTERNAL",)), FenceBrokerRecord(id=2, epoch=2),
        FenceBrokerRecord(id=3, epoch=3),
        TopicRecord(name="orders", topic_id=ORDERS),
        partition(ORDERS, 0, [1, 2], 1), partition(ORDERS, 1, [2, 1], 2), partition(ORDERS, 2, [3, 1], 3),
        TopicRecord(name="events", topic_id=EVENTS), partition(EVENTS, 0, [1], -1),
        TopicRecord(name="__consumer_offsets", topic_id=OFFSETS), partition(OFFSETS, 0, [1], 1),
    ]
    metadata = MetadataImage()
    for offset, record in enumerate(records):
        metadata.replay(record, offset)
    return metadata


class Broker(SimpleNamespace):
    """What the Metadata handler uses of a broker; `faults_set` makes it build the response whole."""

    def __init__(self, metadata: MetadataImage, faults_set: bool = False) -> None:
        super().__init__(metadata_cache=MetadataCache(metadata, "cluster-x"),
                         faults=SimpleNamespace(error_rules=[object()] if faults_set else []), authorizer=None,
                         auto_topic_creation=SimpleNamespace(create_topics=self._create_topics))

    async def _create_topics(self, names: list[str]) -> dict[str, ErrorCode]:
        return {name: ErrorCode.POLICY_VIOLATION for name in names}


def answer(broker: Broker, version: int, request: MetadataRequest) -> bytes:
    ctx = RequestContext(broker, Request(RequestKind.KAFKA, RequestHeader(ApiKey.METADATA, version, 7, "test"),
                                         SCHEMA, request, ConnectionInfo(1, "127.0.0.1:1", "PLAINTEXT"), b"", 0,
                                         lambda: False))
    response = trio.run(handle_metadata, ctx, request)
    assert isinstance(ctx.splicer, EncodedTopics) == (not broker.faults.error_rules)
    return encode_response(SCHEMA, version, 7, response, ctx.splicer)


def requests(version: int) -> list[MetadataRequest]:
    cls = MetadataRequest[version]
    topic = cls.MetadataRequestTopic
    flags = {"allow_auto_topic_creation": True, "include_topic_authorized_operations": True,
             "include_cluster_authorized_operations": False}
    every = cls(topics=[] if version == 0 else None, **flags)
    named = cls(topics=[topic(name=n, topic_id=uuid.UUID(int=0)) for n in ("orders", "missing", "bad/name",
                                                                           "__consumer_offsets", "orders")], **flags)
    out = [every, named]
    if version >= 1:
        out.append(cls(topics=[], **flags))  # none at all
    if version >= 10:
        out.append(cls(topics=[topic(name=None, topic_id=EVENTS), topic(name=None, topic_id=UNKNOWN),
                               topic(name="events", topic_id=UNKNOWN)], **flags))
    return out


@pytest.mark.parametrize("version", range(SCHEMA.min_version, SCHEMA.max_version + 1))
def test_assembled_responses_are_the_whole_encoding_byte_for_byte(version: int) -> None:
    metadata = image()
    for request in requests(version):
        fast, whole = Broker(metadata), Broker(metadata, faults_set=True)
        first = answer(fast, version, request)
        assert first == answer(whole, version, request)
        assert answer(fast, version, request) == first  # from the kept entries


def test_a_change_of_the_image_shows_in_the_next_response() -> None:
    metadata = image()
    broker = Broker(metadata)
    every = MetadataRequest[12](topics=None)
    before = SCHEMA.response[12].decode(answer(broker, 12, every)[9:], version=12)
    leaders = {(t.name, p.partition_index): p.leader_id for t in before.topics for p in t.partitions}
    assert leaders[("orders", 0)] == 1 and leaders[("orders", 2)] == -1
    metadata.replay(PartitionChangeRecord(partition_id=2, topic_id=ORDERS, leader=1, isr=[1]), metadata.offset + 1)
    after = SCHEMA.response[12].decode(answer(broker, 12, every)[9:], version=12)
    orders = next(t for t in after.topics if t.name == "orders")
    assert [(p.partition_index, p.leader_id, p.leader_epoch) for p in orders.partitions][2] == (2, 1, 4)
