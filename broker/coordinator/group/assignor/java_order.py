"""The orders in which Kafka's coordinator walks its hash maps and sets of topic ids and member ids.

Kafka's assignors take members and topics in the iteration order of Java HashMaps and HashSets, which is the order
of hash buckets: the key's hashCode spread (h ^ h >>> 16) and masked by the table size. Walking them in the same
order makes the same group get the same assignment here as in Kafka. Keys sharing a bucket follow insertion order in
Java; here they follow the keys' natural order, the one order both sides can know.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import TypeVar

K = TypeVar("K", str, uuid.UUID)

_MASK64 = (1 << 64) - 1


def _signed64(bits: int) -> int:
    return bits - (1 << 64) if bits >= 1 << 63 else bits


def java_uuid_order(topic_id: uuid.UUID) -> tuple[int, int]:
    """The sort key of Kafka's Uuid.compareTo: the most then the least significant 64 bits, signed."""
    return _signed64(topic_id.int >> 64), _signed64(topic_id.int & _MASK64)


def java_uuid_hash(topic_id: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode, as an unsigned 32-bit value."""
    xor = (topic_id.int >> 64) ^ (topic_id.int & _MASK64)
    return ((xor >> 32) ^ xor) & 0xFFFFFFFF


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as an unsigned 32-bit value."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def hash_map_capacity(size: int) -> int:
    """The table size of a Java HashMap that grew from empty to `size` entries."""
    capacity = 16
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


def hash_set_copy_capacity(size: int) -> int:
    """The table size of a Java HashSet copied from a collection of `size` elements."""
    capacity = 16
    while capacity < int(size / 0.75) + 1:
        capacity *= 2
    return capacity


def java_hash_order(keys: Iterable[K], hash_code: Callable[[K], int], capacity: int,
                    natural: Callable[[K], object] = lambda k: k) -> list[K]:
    """`keys` in the iteration order of a Java hash table of `capacity` buckets."""
    def bucket(key: K) -> int:
        h = hash_code(key)
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(keys, key=lambda k: (bucket(k), natural(k)))


def topic_hash_order(topic_ids: Iterable[uuid.UUID], capacity: int | None = None) -> list[uuid.UUID]:
    """Topic ids in the order of a Java HashSet holding them (by default one copied from a collection)."""
    topic_ids = list(topic_ids)
    if capacity is None:
        capacity = hash_set_copy_capacity(len(topic_ids))
    return java_hash_order(topic_ids, java_uuid_hash, capacity, java_uuid_order)


def member_hash_order(member_ids: Iterable[str]) -> list[str]:
    """Member ids in the order of a Java HashMap filled with them."""
    member_ids = list(member_ids)
    return java_hash_order(member_ids, java_string_hash, hash_map_capacity(len(member_ids)))
