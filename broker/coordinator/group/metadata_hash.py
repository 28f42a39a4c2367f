"""The metadata hash of a modern (consumer or share) group, as Kafka 4.1 computes it (Utils.computeTopicHash and
computeGroupHash): XXH3-64 over each subscribed topic that exists, then over the topics' hashes in name order.
The group's records keep it (MetadataHash), and a change of it (a topic created, deleted, given partitions or
moved to other racks) bumps the group epoch; being Kafka's value, a log written here reads the same to Kafka.

The bytes are those Kafka's hash stream is given: a long is 8 bytes and an int 4, little-endian, and a string its
UTF-16 code units followed by its length."""
from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable

import xxhash

from minikafka.broker.coordinator.group.assignor.assignor_spec import SubscribedTopicDescriber

TOPIC_HASH_MAGIC_BYTE = 0


def _string(value: str) -> bytes:
    units = value.encode("utf-16-le")
    return units + struct.pack("<i", len(units) // 2)


def _signed(digest: int) -> int:
    return digest - (1 << 64) if digest >= 1 << 63 else digest


def topic_hash(topic_id: uuid.UUID, name: str, describer: SubscribedTopicDescriber) -> int:
    """Kafka's computeTopicHash: the magic byte, the id's two halves, the name, the partition count, then each
    partition's index and its replicas' racks in order, each rack as its length and itself."""
    partitions = describer.num_partitions(topic_id)
    out = bytearray(struct.pack("<B", TOPIC_HASH_MAGIC_BYTE))
    out += topic_id.bytes[:8][::-1] + topic_id.bytes[8:][::-1]
    out += _string(name) + struct.pack("<i", partitions)
    for partition in range(partitions):
        out += struct.pack("<i", partition)
        for rack in sorted(describer.racks_for_partition(topic_id, partition)):
            out += struct.pack("<i", len(rack.encode("utf-16-le")) // 2) + _string(rack)
    return _signed(xxhash.xxh3_64_intdigest(bytes(out)))


def metadata_hash(topics: Iterable[str], describer: SubscribedTopicDescriber) -> int:
    """Kafka's computeGroupHash of the subscribed topics that exist; 0 when none does."""
    hashes = []
    for name in sorted(set(topics)):
        topic_id = describer.topic_id(name)
        if topic_id is not None:
            hashes.append(topic_hash(topic_id, name, describer))
    if not hashes:
        return 0
    return _signed(xxhash.xxh3_64_intdigest(struct.pack(f"<{len(hashes)}q", *hashes)))
