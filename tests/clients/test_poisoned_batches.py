"""Batches with a correct CRC but wrong contents are refused as Kafka refuses them, the log end offset stays where
it was, and a confluent-kafka consumer reads the good records on both sides of the refused batch."""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import NamedTuple

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from tests.helpers import DEFAULT_WAIT_S, create_topic, fetch, produce
from tests.raw_client import RawConnection
from tests.record_bytes import COMPRESSORS, batch, record

# Each test with the compiled record walk and with the Python one.
pytestmark = pytest.mark.usefixtures("record_walk")

UNKNOWN_SERVER_ERROR = -1
INVALID_TIMESTAMP = 32
INVALID_RECORD = 87
POLL_S = 0.2


class Poison(NamedTuple):
    build: Callable[[], bytes]
    code: int
    record_errors: list[int] | None = None  # batch indexes Produce v8+ lists, for record-level refusals
    topic_configs: dict[str, str] = {}


POISONS = {
    "compression-id-6": Poison(lambda: batch([record(0, b"p")], codec=6, payload=record(0, b"p")),
                               UNKNOWN_SERVER_ERROR),
    "compression-id-7": Poison(lambda: batch([record(0, b"p")], codec=7, payload=record(0, b"p")),
                               UNKNOWN_SERVER_ERROR),
    "gzip-not-decompressing": Poison(lambda: batch([record(0, b"p")], codec=1, payload=b"\x1f\x8b junk"),
                                     UNKNOWN_SERVER_ERROR),
    "zstd-cut-short": Poison(lambda: batch([record(0, b"p")], codec=4, payload=COMPRESSORS[4](record(0, b"p"))[:-4]),
                             UNKNOWN_SERVER_ERROR),
    "garbage-records": Poison(lambda: batch([b"\x07" * 50], count=1), INVALID_RECORD),
    "count-2147483647-for-3-records": Poison(
        lambda: batch([record(i, b"p%d" % i) for i in range(3)], count=2**31 - 1), INVALID_RECORD),
    "count-below-records": Poison(lambda: batch([record(i, b"p%d" % i) for i in range(3)], count=2),
                                  INVALID_RECORD),
    "offset-delta-gap": Poison(lambda: batch([record(0, b"p"), record(2, b"q")]), INVALID_RECORD),
    "lz4-offset-delta-gap": Poison(lambda: batch([record(0, b"p"), record(2, b"q")], codec=3), INVALID_RECORD),
    "timestamp-out-of-range": Poison(
        lambda: batch([record(0, b"p"), record(1, b"q", timestamp_delta=-7_200_000)]), INVALID_TIMESTAMP, [1],
        {"message.timestamp.before.max.ms": "3600000"}),
    "compacted-without-key": Poison(
        lambda: batch([record(0, b"p", key=b"k"), record(1, b"q"), record(2, b"r")]), INVALID_RECORD, [1, 2],
        {"cleanup.policy": "compact"}),
}


def consume_values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The first `count` values of partition 0 as a confluent-kafka consumer reads them from the beginning."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"poison-{uuid.uuid4()}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values: list[bytes] = []
        deadline = time.monotonic() + DEFAULT_WAIT_S
        for _ in range(int(DEFAULT_WAIT_S / POLL_S) + 1):  # each consume waits at most POLL_S
            if len(values) >= count or time.monotonic() > deadline:
                break
            for message in consumer.consume(num_messages=count, timeout=POLL_S):
                if message.error() is not None:
                    raise KafkaException(message.error())
                values.append(message.value())
        return values
    finally:
        consumer.close()


# Every poison at v9; those refused record by record also at v7, which has no record_errors, and one at v3.
CASES = [(name, 9) for name in POISONS] + [(name, 7) for name, p in POISONS.items() if p.record_errors] + [
    ("compression-id-6", 3)]


@pytest.mark.parametrize("name, version", CASES)
def test_poisoned_batch_is_refused_and_the_partition_stays_readable(broker, unique_topic, name, version):
    poison = POISONS[name]
    with RawConnection(broker.bootstrap_servers) as conn:
        create_topic(conn, unique_topic, **poison.topic_configs)
        before = produce(conn, unique_topic, 0, batch([record(0, b"before", key=b"k")]))
        assert (before.error_code, before.base_offset) == (0, 0)

        refused = produce(conn, unique_topic, 0, poison.build(), version=version)
        assert refused.error_code == poison.code
        assert refused.base_offset == -1
        if version >= 8 and poison.record_errors is not None:
            assert [e.batch_index for e in refused.record_errors] == poison.record_errors
            assert all(e.batch_index_error_message for e in refused.record_errors)
            assert refused.error_message.startswith("One or more records have been rejected")
        elif version >= 8:
            assert refused.record_errors == []

        after = produce(conn, unique_topic, 0, batch([record(0, b"after", key=b"k")]))
        assert (after.error_code, after.base_offset) == (0, 1)  # the refused batch took no offsets
        assert fetch(conn, unique_topic, 0, 0).high_watermark == 2
    assert consume_values(broker.bootstrap_servers, unique_topic, 2) == [b"before", b"after"]
