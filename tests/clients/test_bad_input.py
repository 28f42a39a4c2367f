"""Bad input gets the Kafka error a real broker sends, or a closed connection where Kafka closes one, and
never affects other connections or stored data."""
from __future__ import annotations

import struct

import pytest
from kafka.protocol.admin.topics import CreateTopicsRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.metadata import MetadataRequest

from tests.helpers import create_topic, fetch, produce
from tests.raw_client import RawConnection, record_batch

CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35
INVALID_PARTITIONS = 37
INVALID_RECORD = 87


def metadata_works(bootstrap: str) -> bool:
    with RawConnection(bootstrap) as conn:
        resp = conn.request(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False))
        return len(resp.brokers) == 1


@pytest.fixture
def stored(broker):
    """A topic holding three known records, checked again after each piece of bad input."""
    with RawConnection(broker.bootstrap_servers) as conn:
        create_topic(conn, "kept")
        assert produce(conn, "kept", 0, record_batch([b"one", b"two", b"three"])).error_code == 0
    return broker


def assert_unharmed(broker) -> None:
    assert metadata_works(broker.bootstrap_servers)
    with RawConnection(broker.bootstrap_servers) as conn:
        part = fetch(conn, "kept", 0, 0)
        assert part.error_code == 0 and part.high_watermark == 3
        assert b"one" in part.records and b"three" in part.records


def test_garbage_frame_closes_only_that_connection(stored):
    with RawConnection(stored.bootstrap_servers) as bystander, RawConnection(stored.bootstrap_servers) as bad:
        bad.send_bytes(struct.pack(">i", 3) + b"\x01\x02\x03")
        assert bad.is_closed_by_broker()
        resp = bystander.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
        assert resp.error_code == 0
    assert_unharmed(stored)


def test_truncated_frame_then_disconnect_leaves_broker_serving(stored):
    with RawConnection(stored.bootstrap_servers) as bad:
        bad.send_bytes(struct.pack(">i", 1000) + b"\x00\x03\x00\x0c")
    assert_unharmed(stored)


def test_oversize_frame_closes_connection(broker_factory):
    b = broker_factory(socket_request_max_bytes=1024)
    with RawConnection(b.bootstrap_servers) as bad:
        bad.send_bytes(struct.pack(">i", 2048))
        assert bad.is_closed_by_broker()
    assert metadata_works(b.bootstrap_servers)


def test_unknown_api_key_closes_connection(stored):
    with RawConnection(stored.bootstrap_servers) as bad:
        bad.send_bytes(struct.pack(">ihhih", 10, 999, 0, 1, 0))
        assert bad.is_closed_by_broker()
    assert_unharmed(stored)


def test_unsupported_version_closes_connection(stored):
    with RawConnection(stored.bootstrap_servers) as bad:
        bad.send_bytes(struct.pack(">ihhih", 10, 3, 99, 1, 0))
        assert bad.is_closed_by_broker()
    assert_unharmed(stored)


def test_newer_api_versions_request_gets_v0_answer_with_unsupported_version(stored):
    with RawConnection(stored.bootstrap_servers) as conn:
        conn.send_bytes(struct.pack(">ihhih", 10, 18, 99, 42, 0))
        frame = conn.read_frame()
        (correlation,) = struct.unpack_from(">i", frame)
        assert correlation == 42
        resp = ApiVersionsResponse.decode(frame[4:], version=0)
        assert resp.error_code == UNSUPPORTED_VERSION
        keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert keys[18] == (0, 4) and keys[1] == (4, 18)


def test_corrupt_crc_is_refused_and_stored_data_kept(stored):
    batch = bytearray(record_batch([b"tampered"]))
    batch[-1] ^= 0xFF
    with RawConnection(stored.bootstrap_servers) as conn:
        assert produce(conn, "kept", 0, bytes(batch)).error_code == CORRUPT_MESSAGE
        ok = produce(conn, "kept", 0, record_batch([b"four"]))
        assert ok.error_code == 0 and ok.base_offset == 3
    with RawConnection(stored.bootstrap_servers) as conn:
        part = fetch(conn, "kept", 0, 0)
        assert part.high_watermark == 4 and b"tampered" not in part.records


def test_truncated_batch_is_corrupt(stored):
    with RawConnection(stored.bootstrap_servers) as conn:
        assert produce(conn, "kept", 0, record_batch([b"x" * 100])[:-10]).error_code == CORRUPT_MESSAGE
    assert_unharmed(stored)


def test_batch_over_message_max_bytes_is_message_too_large(broker_factory):
    b = broker_factory(message_max_bytes=2000)
    with RawConnection(b.bootstrap_servers) as conn:
        create_topic(conn, "small")
        assert produce(conn, "small", 0, record_batch([b"x" * 5000])).error_code == MESSAGE_TOO_LARGE
        assert produce(conn, "small", 0, record_batch([b"x" * 500])).error_code == 0


def test_magic_v1_batch_is_invalid_record(stored):
    from kafka.record.memory_records import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=1, key=None, value=b"old", headers=[])
    builder.close()
    with RawConnection(stored.bootstrap_servers) as conn:
        assert produce(conn, "kept", 0, bytes(builder.buffer())).error_code == INVALID_RECORD
    assert_unharmed(stored)


@pytest.mark.parametrize("name", ["bad name", "a/b", "x" * 250, ".", "..", "ünïcode"])
def test_invalid_topic_names(stored, name):
    R = CreateTopicsRequest[7]
    with RawConnection(stored.bootstrap_servers) as conn:
        resp = conn.request(R(topics=[R.CreatableTopic(name=name, num_partitions=1, replication_factor=1,
                                                       assignments=[], configs=[])], timeout_ms=1000))
        assert resp.topics[0].error_code == INVALID_TOPIC_EXCEPTION
        md = conn.request(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                              allow_auto_topic_creation=True,
                                              include_topic_authorized_operations=False))
        assert md.topics[0].error_code == INVALID_TOPIC_EXCEPTION


def test_negative_and_missing_partitions(stored):
    R = CreateTopicsRequest[7]
    with RawConnection(stored.bootstrap_servers) as conn:
        resp = conn.request(R(topics=[R.CreatableTopic(name="negative", num_partitions=-5, replication_factor=1,
                                                       assignments=[], configs=[])], timeout_ms=1000))
        assert resp.topics[0].error_code == INVALID_PARTITIONS
        assert produce(conn, "kept", -1, record_batch([b"n"])).error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert produce(conn, "kept", 7, record_batch([b"n"])).error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert fetch(conn, "kept", -1, 0).error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert_unharmed(stored)


def test_two_batches_for_one_partition_are_invalid_record(stored):
    with RawConnection(stored.bootstrap_servers) as conn:
        two = record_batch([b"first"]) + record_batch([b"second"])
        assert produce(conn, "kept", 0, two).error_code == INVALID_RECORD
    assert_unharmed(stored)
