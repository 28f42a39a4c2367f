"""The metadata hash of consumer and share groups is Kafka 4.1's: XXH3-64 over the bytes Kafka's hash stream is
given for each subscribed topic, then over the topic hashes in name order."""
from __future__ import annotations

import struct
import uuid

import xxhash

from minikafka.broker.coordinator.group.assignor.assignor_spec import SubscribedTopicDescriber, TopicMetadata
from minikafka.broker.coordinator.group.metadata_hash import metadata_hash, topic_hash

FOO = uuid.UUID("0123456789abcdef0011223344556677")
BAR = uuid.UUID("fedcba98765432100123456789abcdef")


def signed(value: int) -> int:
    return struct.unpack("<q", struct.pack("<Q", value))[0]


def test_a_topic_hashes_the_bytes_kafka_streams():
    describer = SubscribedTopicDescriber([TopicMetadata(FOO, "foo", 2, {0: frozenset({"r2", "r1"})})])
    streamed = (b"\x00"  # the magic byte
                + bytes.fromhex("efcdab8967452301") + bytes.fromhex("7766554433221100")  # id halves, little-endian
                + "foo".encode("utf-16-le") + struct.pack("<i", 3)  # a string: its UTF-16 units, then its length
                + struct.pack("<i", 2)  # the partition count
                + struct.pack("<i", 0)  # partition 0, its racks in order, each as a length and the string
                + struct.pack("<i", 2) + "r1".encode("utf-16-le") + struct.pack("<i", 2)
                + struct.pack("<i", 2) + "r2".encode("utf-16-le") + struct.pack("<i", 2)
                + struct.pack("<i", 1))  # partition 1, no racks
    assert topic_hash(FOO, "foo", describer) == signed(xxhash.xxh3_64_intdigest(streamed))


def test_the_group_hash_takes_existing_topics_in_name_order():
    describer = SubscribedTopicDescriber([TopicMetadata(FOO, "foo", 3), TopicMetadata(BAR, "bar", 1)])
    bar, foo = topic_hash(BAR, "bar", describer), topic_hash(FOO, "foo", describer)
    expected = signed(xxhash.xxh3_64_intdigest(struct.pack("<qq", bar, foo)))
    assert metadata_hash(["foo", "missing", "bar"], describer) == expected
    assert metadata_hash({"bar", "foo"}, describer) == expected
    assert metadata_hash(["missing"], describer) == 0 and metadata_hash([], describer) == 0
    grown = SubscribedTopicDescriber([TopicMetadata(FOO, "foo", 4), TopicMetadata(BAR, "bar", 1)])
    assert metadata_hash(["foo", "bar"], grown) != expected
    assert -(1 << 63) <= expected < 1 << 63
