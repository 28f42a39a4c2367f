"""Fetch at the wire: size limits (KIP-74), long poll, out-of-range offsets, topic ids."""
from __future__ import annotations

import threading
import time
import uuid

from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.metadata.metadata import MetadataRequest

from tests.helpers import create_topic, produce, wait_until
from tests.raw_client import RawConnection, record_batch

OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_ID = 100


def fetch(conn, parts, *, version=12, max_bytes=1 << 20, min_bytes=0, max_wait_ms=0, topic_id=None):
    """parts: [(topic, partition, offset, partition_max_bytes)]"""
    R = FetchRequest[version]
    by_topic: dict[str, list] = {}
    for topic, partition, offset, pmax in parts:
        by_topic.setdefault(topic, []).append(R.FetchTopic.FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=pmax))
    topics = [R.FetchTopic(topic=None if version >= 13 else t, topic_id=topic_id if version >= 13 else None,
                           partitions=ps) for t, ps in by_topic.items()]
    return conn.request(R(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                          isolation_level=0, session_id=0, session_epoch=-1, topics=topics,
                          forgotten_topics_data=[], rack_id=""))


def test_first_batch_is_returned_even_when_larger_than_the_limits(broker):
    with RawConnection(broker.bootstrap_servers) as conn:
        create_topic(conn, "big", partitions=2)
        big = record_batch([b"x" * 5000])
        assert produce(conn, "big", 0, big).error_code == 0
        assert produce(conn, "big", 1, big).error_code == 0
        resp = fetch(conn, [("big", 0, 0, 100), ("big", 1, 0, 100)], max_bytes=1000)
        p0, p1 = resp.responses[0].partitions
        assert len(p0.records) == len(big) and b"x" * 5000 in p0.records
        assert p1.records in (b"", None) and p1.high_watermark == 1


def test_partition_max_bytes_bounds_later_batches(broker):
    with RawConnection(broker.bootstrap_servers) as conn:
        create_topic(conn, "bounded")
        for i in range(5):
            assert produce(conn, "bounded", 0, record_batch([b"%d" % i * 300])).error_code == 0
        one = len(record_batch([b"0" * 300]))
        resp = fetch(conn, [("bounded", 0, 0, 2 * one + 10)])
        assert len(resp.responses[0].partitions[0].records) == 2 * one


def test_long_poll_returns_when_data_arrives_and_times_out_empty(broker):
    with RawConnection(broker.bootstrap_servers) as conn:
        create_topic(conn, "poll")
        started = time.monotonic()
        resp = fetch(conn, [("poll", 0, 0, 1 << 20)], min_bytes=1, max_wait_ms=600)
        waited = time.monotonic() - started
        assert resp.responses[0].partitions[0].records in (b"", None) and waited >= 0.5

        def later():
            wait_until(lambda: broker.state.delayed_operations() == 1, message="the fetch to wait in the purgatory")
            with RawConnection(broker.bootstrap_servers) as other:
                produce(other, "poll", 0, record_batch([b"wake"]))

        thread = threading.Thread(target=later)
        thread.start()
        started = time.monotonic()
        resp = fetch(conn, [("poll", 0, 0, 1 << 20)], min_bytes=1, max_wait_ms=10_000)
        thread.join(10)
        assert b"wake" in resp.responses[0].partitions[0].records
        assert time.monotonic() - started < 5


def test_offset_beyond_log_end_is_out_of_range(broker):
    with RawConnection(broker.bootstrap_servers) as conn:
        create_topic(conn, "range")
        produce(conn, "range", 0, record_batch([b"a", b"b"]))
        part = fetch(conn, [("range", 0, 5, 1 << 20)]).responses[0].partitions[0]
        assert part.error_code == OFFSET_OUT_OF_RANGE and part.high_watermark == 2 and part.log_start_offset == 0
        assert fetch(conn, [("range", 0, 2, 1 << 20)]).responses[0].partitions[0].error_code == 0


def test_fetch_by_topic_id(broker):
    with RawConnection(broker.bootstrap_servers) as conn:
        create_topic(conn, "by-id")
        produce(conn, "by-id", 0, record_batch([b"identified"]))
        md = conn.request(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name="by-id")],
                                              allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False))
        topic_id = md.topics[0].topic_id
        assert topic_id != uuid.UUID(int=0)
        resp = fetch(conn, [("by-id", 0, 0, 1 << 20)], version=16, topic_id=topic_id)
        assert resp.responses[0].topic_id == topic_id
        assert b"identified" in resp.responses[0].partitions[0].records
        missing = fetch(conn, [("by-id", 0, 0, 1 << 20)], version=16, topic_id=uuid.uuid4())
        assert missing.responses[0].partitions[0].error_code == UNKNOWN_TOPIC_ID


def test_unknown_topic_id_is_answered_at_once_not_after_max_wait(broker):
    with RawConnection(broker.bootstrap_servers) as conn:
        started = time.monotonic()
        resp = fetch(conn, [("x", 0, 0, 1 << 20)], version=16, topic_id=uuid.uuid4(), min_bytes=1,
                     max_wait_ms=5000)
        assert resp.responses[0].partitions[0].error_code == UNKNOWN_TOPIC_ID
        assert time.monotonic() - started < 2


def test_reads_across_rolled_segments_return_every_batch_in_order(broker):
    from kafka.protocol.admin.topics import DeleteTopicsRequest

    with RawConnection(broker.bootstrap_servers) as conn:
        create_topic(conn, "rolled", **{"internal.segment.bytes": "4096"})
        values = [b"%04d" % i + b"." * 1000 for i in range(40)]
        for value in values:
            assert produce(conn, "rolled", 0, record_batch([value])).error_code == 0
        seen, offset = [], 0
        for _ in range(100):  # bounded: each fetch returns at least one batch until the end
            part = fetch(conn, [("rolled", 0, offset, 3000)]).responses[0].partitions[0]
            assert part.error_code == 0
            if not part.records:
                break
            got = [v for v in values if v in part.records]
            seen += got
            offset += len(got)
        assert seen == values
        D = DeleteTopicsRequest[6]
        deleted = conn.request(D(topics=[D.DeleteTopicState(name="rolled", topic_id=uuid.UUID(int=0))],
                                 timeout_ms=10000))
        assert deleted.responses[0].error_code == 0
