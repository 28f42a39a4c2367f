"""The Java client's view of minikafka, at the wire.

Kafka's Java client (kafka-clients, which Spark's JVM Kafka source runs on) is the strictest Kafka client and cannot
run here. These tests send the requests it sends, at the versions it picks against our ApiVersions (the newest both
sides support), with the field values it fills in, and assert every field of the answers that its code reads:
NetworkClient (ApiVersions, response headers), Metadata, the consumer's FetchSessionHandler / AbstractFetch /
FetchCollector, OffsetFetcher and OffsetsForLeaderEpochUtils, the idempotent producer's TransactionManager, and the
AdminClient's describeCluster, describeTopics (DescribeTopicPartitions paging) and listOffsets.

Each request is also checked strictly: a flexible response carries header v1 (an empty tagged-field section), and the
body is exactly one response of the version asked, with no byte left over.
"""
from __future__ import annotations

import struct
import time
import uuid

import pytest
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

import minikafka
from minikafka.control_client import ControlClient
from minikafka.protocol.codec import SCHEMAS
from tests.raw_client import RawConnection

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
API_VERSIONS, CREATE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH = 18, 19, 21, 22, 23
DESCRIBE_CLUSTER, DESCRIBE_TOPIC_PARTITIONS = 60, 75

# The newest version of each API that a kafka-clients release sends: validVersions of
# clients/src/main/resources/common/message/*Request.json on apache/kafka's release branches and on trunk as it was
# becoming 4.0. Spark 3.5 ships kafka-clients 3.4.1, Spark 4.0 ships 3.9.0. A client uses min(its, ours).
JAVA_CLIENT_MAX_VERSIONS: dict[str, dict[int, int]] = {
    "3.4": {PRODUCE: 9, FETCH: 13, LIST_OFFSETS: 7, METADATA: 12, API_VERSIONS: 3, CREATE_TOPICS: 7,
            DELETE_RECORDS: 2, INIT_PRODUCER_ID: 4, OFFSET_FOR_LEADER_EPOCH: 4, DESCRIBE_CLUSTER: 0},
    "3.5": {PRODUCE: 9, FETCH: 15, LIST_OFFSETS: 8, METADATA: 12, API_VERSIONS: 3, CREATE_TOPICS: 7,
            DELETE_RECORDS: 2, INIT_PRODUCER_ID: 4, OFFSET_FOR_LEADER_EPOCH: 4, DESCRIBE_CLUSTER: 0},
    "3.7": {PRODUCE: 10, FETCH: 16, LIST_OFFSETS: 8, METADATA: 12, API_VERSIONS: 3, CREATE_TOPICS: 7,
            DELETE_RECORDS: 2, INIT_PRODUCER_ID: 4, OFFSET_FOR_LEADER_EPOCH: 4, DESCRIBE_CLUSTER: 1},
    "3.9": {PRODUCE: 11, FETCH: 17, LIST_OFFSETS: 9, METADATA: 12, API_VERSIONS: 4, CREATE_TOPICS: 7,
            DELETE_RECORDS: 2, INIT_PRODUCER_ID: 5, OFFSET_FOR_LEADER_EPOCH: 4, DESCRIBE_CLUSTER: 1,
            DESCRIBE_TOPIC_PARTITIONS: 0},
    "4.0": {PRODUCE: 11, FETCH: 17, LIST_OFFSETS: 10, METADATA: 12, API_VERSIONS: 4, CREATE_TOPICS: 7,
            DELETE_RECORDS: 2, INIT_PRODUCER_ID: 5, OFFSET_FOR_LEADER_EPOCH: 4, DESCRIBE_CLUSTER: 1,
            DESCRIBE_TOPIC_PARTITIONS: 0},
}
# "newest" stands for a later client: it picks our advertised maximum of every API.
CLIENTS = [*JAVA_CLIENT_MAX_VERSIONS, "newest"]
# The oldest version the Java client's request builders accept for what these paths send: Produce.forMagic(v2) 3,
# Fetch 4 (4.0's oldest; topic ids need 13, checked where used), ListOffsets for the AdminClient (requireTimestamp)
# 1, OffsetsForLeaderEpochRequest.forConsumer 3, InitProducerId with a producer id and epoch (KIP-360) 3.
JAVA_OLDEST = {PRODUCE: 3, FETCH: 4, LIST_OFFSETS: 1, METADATA: 0, API_VERSIONS: 0, CREATE_TOPICS: 0,
               DELETE_RECORDS: 0, INIT_PRODUCER_ID: 3, OFFSET_FOR_LEADER_EPOCH: 3, DESCRIBE_CLUSTER: 0,
               DESCRIBE_TOPIC_PARTITIONS: 0}

NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
UNSUPPORTED_VERSION = 35
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47
UNKNOWN_LEADER_EPOCH = 75
UNKNOWN_TOPIC_ID = 100

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
ZERO_UUID = uuid.UUID(int=0)
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
# ConsumerConfig defaults the Java consumer fills into every Fetch.
FETCH_MAX_WAIT_MS, FETCH_MAX_BYTES, MAX_PARTITION_FETCH_BYTES = 500, 52_428_800, 1_048_576


# ---- a broker for the module, and the requests as the Java client sends them --------------------------------------

@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    base = tmp_path_factory.mktemp("java-wire")
    with minikafka.Broker(data_dir=base / "data", log_path=base / "broker.log") as broker:
        yield broker


@pytest.fixture
def conn(kafka):
    with RawConnection(kafka.bootstrap_servers) as c:
        yield c


@pytest.fixture(scope="module")
def advertised(kafka) -> dict[int, tuple[int, int]]:
    with RawConnection(kafka.bootstrap_servers) as c:
        resp = call(c, SCHEMAS[API_VERSIONS].request[3](client_software_name="apache-kafka-java",
                                                         client_software_version="3.9.0"))
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def picked(advertised: dict[int, tuple[int, int]], client: str, api_key: int) -> int:
    """The version NetworkClient sends: the newest in both its range and ours (NodeApiVersions.latestUsableVersion)."""
    lo, hi = advertised[api_key]
    theirs = SCHEMAS[api_key].max_version if client == "newest" else JAVA_CLIENT_MAX_VERSIONS[client][api_key]
    version = min(theirs, hi)
    assert version >= max(lo, JAVA_OLDEST[api_key]), f"no usable version of API {api_key} for client {client}"
    return version


def call(conn: RawConnection, request):
    """Send one request; decode its response the strict way: header version, exact body length."""
    correlation = conn.send(request)
    frame = conn.read_frame()
    assert frame is not None, "broker closed the connection"
    assert struct.unpack_from(">i", frame)[0] == correlation
    key, version = request.API_KEY, request.API_VERSION
    schema = SCHEMAS[key]
    pos = 4
    if schema.flexible(version) and key != API_VERSIONS:
        assert frame[4] == 0, "a flexible response has header v1, ending in an empty tagged-field section"
        pos = 5
    body = bytes(frame[pos:])
    response = schema.response.decode(body, version=version)
    assert response.version == version
    assert response.encode() == body, "the body must be one whole response of the version asked"
    return response


def create_topic(conn: RawConnection, name: str, partitions: int) -> uuid.UUID:
    R = SCHEMAS[CREATE_TOPICS].request[7]
    resp = call(conn, R(topics=[R.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                                                 assignments=[], configs=[])], timeout_ms=30000,
                        validate_only=False))
    (t,) = resp.topics
    assert t.error_code == NONE, t
    # KafkaAdminClient.createTopics reads these on success (TopicMetadataAndConfig); configs must not be null.
    assert t.topic_id != ZERO_UUID and t.num_partitions == partitions and t.replication_factor == 1
    assert t.topic_config_error_code == NONE and t.configs is not None
    return t.topic_id


def metadata(conn: RawConnection, names: list[str] | None, version: int = 12, allow_auto_create: bool = False):
    R = SCHEMAS[METADATA].request[version]
    topics = None if names is None else [R.MetadataRequestTopic(topic_id=ZERO_UUID, name=n) for n in names]
    return call(conn, R(topics=topics, allow_auto_topic_creation=allow_auto_create,
                        include_topic_authorized_operations=False))


def leader_epoch(conn: RawConnection, topic: str, partition: int) -> int:
    """What the Java client keeps as the partition's current leader epoch, from Metadata."""
    (t,) = metadata(conn, [topic]).topics
    return next(p.leader_epoch for p in t.partitions if p.partition_index == partition)


def batch(values: list[bytes], timestamps: list[int] | None = None,
          producer: tuple[int, int, int] = (-1, -1, -1)) -> bytes:
    """One v2 record batch as the Java producer builds it; `producer` is (id, epoch, base sequence)."""
    pid, epoch, seq = producer
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 24, producer_id=pid,
                                   producer_epoch=epoch, base_sequence=seq)
    now = int(time.time() * 1000)
    for i, value in enumerate(values):
        builder.append(timestamp=now if timestamps is None else timestamps[i], key=None, value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


def produce(conn: RawConnection, topic: str, partition: int, records: bytes, version: int = 11,
            topic_id: uuid.UUID | None = None):
    """A Java producer's Produce (acks=all, request.timeout.ms 30 s); returns the partition's response."""
    R = SCHEMAS[PRODUCE].request[version]
    by_id = version >= 13
    resp = call(conn, R(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[R.TopicProduceData(
        name=None if by_id else topic, topic_id=topic_id if by_id else None,
        partition_data=[R.TopicProduceData.PartitionProduceData(index=partition, records=records)])]))
    (t,) = resp.responses
    assert (t.topic_id == topic_id) if by_id else (t.name == topic)
    (p,) = t.partition_responses
    assert p.index == partition
    return p


def list_offsets(conn: RawConnection, version: int, topic: str, specs: list[tuple[int, int]],
                 current_leader_epoch: int = -1, isolation_level: int = READ_UNCOMMITTED) -> list:
    """ListOffsets as the consumer's OffsetFetcher and the AdminClient's ListOffsetsHandler send it."""
    R = SCHEMAS[LIST_OFFSETS].request[version]
    T = R.ListOffsetsTopic
    partitions = [T.ListOffsetsPartition(partition_index=p, current_leader_epoch=current_leader_epoch, timestamp=ts)
                  for p, ts in specs]
    resp = call(conn, R(replica_id=-1, isolation_level=isolation_level, timeout_ms=30000,
                        topics=[T(name=topic, partitions=partitions)]))
    (t,) = resp.topics
    assert t.name == topic
    # ListOffsetsHandler's sanity check: every partition asked for has a result.
    assert [p.partition_index for p in t.partitions] == [p for p, _ in specs]
    return t.partitions


FetchPart = tuple[int, int, int, int]  # partition, fetch offset, partition max bytes, current leader epoch


def fetch(conn: RawConnection, version: int, topics: list[tuple[str, uuid.UUID, list[FetchPart]]], *,
          max_wait_ms: int = FETCH_MAX_WAIT_MS, min_bytes: int = 1, max_bytes: int = FETCH_MAX_BYTES,
          session_epoch: int = 0, isolation_level: int = READ_UNCOMMITTED):
    """A consumer's full Fetch (AbstractFetch.createFetchRequest): session 0, no last fetched epoch."""
    R = SCHEMAS[FETCH].request[version]
    by_id = version >= 13
    entries = [R.FetchTopic(topic=None if by_id else name, topic_id=topic_id if by_id else None, partitions=[
        R.FetchTopic.FetchPartition(partition=p, current_leader_epoch=epoch, fetch_offset=offset,
                                    last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=pmax)
        for p, offset, pmax, epoch in parts]) for name, topic_id, parts in topics]
    fields = dict(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=isolation_level,
                  session_id=0, session_epoch=session_epoch, topics=entries, forgotten_topics_data=[], rack_id="")
    if version < 15:
        fields["replica_id"] = -1
    return call(conn, R(**fields))


def fetched_partitions(resp, version: int, topics: list[tuple[str, uuid.UUID, list[FetchPart]]]) -> dict:
    """The response's partitions by (topic, partition), checked as FetchSessionHandler.handleResponse does.

    A full fetch response must hold every partition of the request (no omitted, no extra ones) and, from v13, only
    topic ids of the request; otherwise the Java client drops the whole response as invalid.
    """
    assert resp.error_code == NONE
    assert resp.session_id >= 0  # epoch 0 opens a fetch session (KIP-227); a full fetch answers every partition
    names_by_id = {topic_id: name for name, topic_id, _ in topics}
    got = {}
    for t in resp.responses:
        assert version < 13 or t.topic_id in names_by_id, "a topic id the request did not name"
        name = names_by_id[t.topic_id] if version >= 13 else t.topic
        for p in t.partitions:
            assert (name, p.partition_index) not in got, "a partition answered twice"
            got[(name, p.partition_index)] = p
    assert set(got) == {(name, p[0]) for name, _, parts in topics for p in parts}
    return got


def batches(records: bytes) -> list:
    """The complete batches of a records field, as the Java consumer reads them (a partial last one is skipped)."""
    out = []
    for b in MemoryRecords(records):
        assert b.magic == 2
        assert b.validate_crc(), "CRC32C must hold (check.crcs is on by default)"
        out.append(b)
    return out


def values_of(records: bytes, from_offset: int = 0) -> list[tuple[int, bytes]]:
    """(offset, value) of the records the consumer hands out: it skips offsets before its position."""
    return [(r.offset, r.value) for b in batches(records) for r in b if r.offset >= from_offset]


def assert_partition_ok(p, *, high_watermark: int, log_start_offset: int = 0) -> None:
    """Fields FetchCollector.updatePartitionState and CompletedFetch read, for a partition without error."""
    assert p.error_code == NONE
    assert p.high_watermark == high_watermark
    assert p.last_stable_offset == high_watermark  # no transactions: everything below the HW is stable
    assert p.log_start_offset == log_start_offset
    assert p.preferred_read_replica == -1  # -1: keep fetching from the leader
    assert p.diverging_epoch is None or p.diverging_epoch.epoch == -1  # FetchResponse.isDivergingEpoch: false
    assert p.aborted_transactions is None or p.aborted_transactions == []
    if p.records:
        assert batches(p.records), "non-empty records without a complete batch make the Java consumer fail"


# ---- ApiVersions ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("client", list(JAVA_CLIENT_MAX_VERSIONS))
def test_api_versions_as_network_client_reads_them(conn, client):
    version = JAVA_CLIENT_MAX_VERSIONS[client][API_VERSIONS]
    resp = call(conn, SCHEMAS[API_VERSIONS].request[version](client_software_name="apache-kafka-java",
                                                              client_software_version=f"{client}.0"))
    assert resp.error_code == NONE and resp.throttle_time_ms == 0
    keys = [k.api_key for k in resp.api_keys]
    assert len(keys) == len(set(keys)), "each API once (NodeApiVersions keeps one range per key)"
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    for api_key in JAVA_CLIENT_MAX_VERSIONS[client]:
        lo, hi = ranges[api_key]
        assert 0 <= lo <= hi
        picked(ranges, client, api_key)
    # Finalized features are read only with an epoch >= 0 (ApiVersions.update); transaction.version 2 switches a 4.x
    # transactional producer to KIP-890's second protocol, which this broker serves (test_transactions_v2.py).
    finalized = {f.name: f for f in resp.finalized_features or []}
    assert resp.finalized_features_epoch >= 0
    assert finalized["transaction.version"].max_version_level == 2
    supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features or []}
    if version < 4:  # as Kafka (KAFKA-17492): below v4 a supported feature whose lowest level is 0 is left out
        assert "transaction.version" not in supported
    for name, f in finalized.items():
        if name in supported or version >= 4:
            assert name in supported and supported[name][0] <= f.max_version_level <= supported[name][1]


def test_newer_api_versions_request_then_retry_as_network_client_does(conn):
    """A client newer than us sends ApiVersions v5+: we answer v0 UNSUPPORTED_VERSION with our ApiVersions range,
    and NetworkClient.handleApiVersionsResponse retries at our maximum."""
    request = SCHEMAS[API_VERSIONS].request[4](client_software_name="apache-kafka-java", client_software_version="9")
    request.with_header(correlation_id=77, client_id="java")
    frame = bytearray(request.encode(header=True, framed=True))
    struct.pack_into(">h", frame, 6, 5)  # request_api_version: 5
    conn.send_bytes(bytes(frame))
    answer = conn.read_frame()
    assert struct.unpack_from(">i", answer)[0] == 77
    v0 = SCHEMAS[API_VERSIONS].response.decode(answer[4:], version=0)
    assert v0.error_code == UNSUPPORTED_VERSION
    retry_version = next(k.max_version for k in v0.api_keys if k.api_key == API_VERSIONS)
    assert retry_version >= 3
    resp = call(conn, SCHEMAS[API_VERSIONS].request[retry_version](client_software_name="apache-kafka-java",
                                                                    client_software_version="9"))
    assert resp.error_code == NONE


# ---- Metadata, DescribeCluster, DescribeTopicPartitions ------------------------------------------------------------

@pytest.mark.parametrize("client", ["3.9", "newest"])
def test_metadata_as_the_client_metadata_cache_reads_it(kafka, conn, advertised, client):
    topic_id = create_topic(conn, f"jmd-{client}", 3)
    version = picked(advertised, client, METADATA)
    resp = metadata(conn, [f"jmd-{client}", "jmd-absent"], version=version)
    if version >= 13:
        assert resp.error_code == NONE
    assert resp.cluster_id and isinstance(resp.cluster_id, str)
    host, port = kafka.bootstrap_servers.rsplit(":", 1)
    assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [(1, host, int(port))]
    assert resp.controller_id == 1  # a node in brokers: MetadataResponse.buildCluster looks it up there
    found, absent = resp.topics
    assert (found.error_code, found.name, found.topic_id, found.is_internal) == (NONE, f"jmd-{client}", topic_id, False)
    assert found.authorized_operations is None  # INT32_MIN on the wire: not requested
    assert [p.partition_index for p in found.partitions] == [0, 1, 2]
    for p in found.partitions:
        assert p.error_code == NONE and p.leader_id == 1 and p.leader_epoch >= 0
        assert p.replica_nodes == [1] and p.isr_nodes == [1] and p.offline_replicas == []
    assert (absent.error_code, absent.name, absent.partitions) == (UNKNOWN_TOPIC_OR_PARTITION, "jmd-absent", [])
    assert absent.topic_id in (None, ZERO_UUID)  # kafka-python reads the zero uuid as None
    # The AdminClient's bootstrap metadata asks for no topic at all: brokers, and no topics.
    empty = metadata(conn, [], version=version)
    assert empty.topics == [] and len(empty.brokers) == 1
    everything = metadata(conn, None, version=version)
    assert {t.name: t.topic_id for t in everything.topics}[f"jmd-{client}"] == topic_id
    # Admin.describeTopics(TopicCollection.ofTopicIds(...)): by id, and MetadataResponse.errorsByTopicId throws on
    # any topic answered with the zero id, so an unknown id must come back as itself.
    R = SCHEMAS[METADATA].request[version]
    stranger = uuid.uuid4()
    by_id = call(conn, R(topics=[R.MetadataRequestTopic(topic_id=topic_id, name=None),
                                 R.MetadataRequestTopic(topic_id=stranger, name=None)],
                         allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    known, unknown = by_id.topics
    assert (known.error_code, known.name, known.topic_id, len(known.partitions)) == (
        NONE, f"jmd-{client}", topic_id, 3)
    assert (unknown.error_code, unknown.topic_id) == (UNKNOWN_TOPIC_ID, stranger)


@pytest.mark.parametrize("client", ["3.4", "3.9", "newest"])  # DescribeCluster v0, 1, 2
def test_describe_cluster_as_admin_client_reads_it(kafka, conn, advertised, client):
    version = picked(advertised, client, DESCRIBE_CLUSTER)
    R = SCHEMAS[DESCRIBE_CLUSTER].request[version]
    resp = call(conn, R(include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=False))
    assert resp.error_code == NONE and resp.error_message is None
    if version >= 1:
        assert resp.endpoint_type == 1
    host, port = kafka.bootstrap_servers.rsplit(":", 1)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers] == [(1, host, int(port), None)]
    if version >= 2:
        assert [b.is_fenced for b in resp.brokers] == [False]
    assert resp.controller_id == 1
    assert resp.cluster_id == metadata(conn, []).cluster_id
    # Not requested: AUTHORIZED_OPERATIONS_OMITTED (INT32_MIN), the body's last field before its tagged fields.
    correlation = conn.send(R(include_cluster_authorized_operations=False, endpoint_type=1,
                              include_fenced_brokers=False))
    frame = conn.read_frame()
    assert struct.unpack_from(">i", frame)[0] == correlation
    assert struct.unpack_from(">i", frame, len(frame) - 5)[0] == INT32_MIN and frame[-1] == 0
    asked = call(conn, R(include_cluster_authorized_operations=True, endpoint_type=1, include_fenced_brokers=False))
    assert asked.authorized_operations  # some operations, as KafkaAdminClient.validAclOperations decodes them


def describe_topics_like_admin_client(conn: RawConnection, names: list[str], limit: int) -> tuple[dict, int]:
    """KafkaAdminClient.describeTopics with DescribeTopicPartitions, its cursor handling transcribed.

    Returns ({topic: description or error code}, number of requests sent).
    """
    R = SCHEMAS[DESCRIBE_TOPIC_PARTITIONS].request[0]
    pending = sorted(set(names))
    results: dict[str, object] = {}
    partial: dict | None = None  # the topic whose partitions continue in the next response
    requests = 0
    while pending:
        requests += 1
        assert requests <= 100, "paging does not end"
        cursor = None if partial is None else R.Cursor(topic_name=partial["name"],
                                                       partition_index=len(partial["partitions"]))
        resp = call(conn, R(topics=[R.TopicRequest(name=n) for n in pending], response_partition_limit=limit,
                            cursor=cursor))
        next_cursor = resp.next_cursor
        next_partial = None
        for t in resp.topics:
            if t.error_code != NONE:
                results[t.name] = t.error_code
                pending.remove(t.name)
                if next_cursor is not None and next_cursor.topic_name == t.name:
                    next_cursor = None
                continue
            for p in t.partitions:
                # DescribeTopicPartitionsResponse.partitionToTopicPartitionInfo streams all four lists.
                assert None not in (p.replica_nodes, p.isr_nodes, p.eligible_leader_replicas, p.last_known_elr), \
                    "a null node list is a NullPointerException in the Java AdminClient"
            description = {"name": t.name, "topic_id": t.topic_id, "internal": t.is_internal,
                           "partitions": [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes,
                                           p.isr_nodes, p.eligible_leader_replicas, p.last_known_elr,
                                           p.offline_replicas) for p in t.partitions]}
            if partial is not None and partial["name"] == t.name:
                partial["partitions"] += description["partitions"]
                continue
            if next_cursor is not None and next_cursor.topic_name == t.name:
                next_partial = description
                continue
            pending.remove(t.name)
            results[t.name] = description
        if partial is not None and (next_cursor is None or next_cursor.topic_name != partial["name"]):
            results[partial["name"]] = partial
            pending.remove(partial["name"])
            partial = None
        if next_partial is not None:
            partial = next_partial
    return results, requests


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 9, 2000])
def test_describe_topic_partitions_pages_as_admin_client_expects(conn, limit):
    sizes = {"jdtp-a": 5, "jdtp-b": 1, "jdtp-c": 3}
    ids = {name: create_topic(conn, f"{name}-{limit}", n) for name, n in sizes.items()}
    names = [f"{name}-{limit}" for name in sizes] + [f"jdtp-absent-{limit}"]
    results, requests = describe_topics_like_admin_client(conn, names[::-1], limit)
    assert results.pop(f"jdtp-absent-{limit}") == UNKNOWN_TOPIC_OR_PARTITION
    assert set(results) == {f"{name}-{limit}" for name in sizes}
    for name, n in sizes.items():
        d = results[f"{name}-{limit}"]
        assert d["topic_id"] == ids[name] and d["internal"] is False
        assert d["partitions"] == [(i, 1, 0, [1], [1], [], [], []) for i in range(n)]
    assert requests <= -(-sum(sizes.values()) // limit) + 1


def test_describe_topic_partitions_limit_is_at_least_one(conn):
    """Kafka answers at least one partition per response; with a limit of 0 the AdminClient would page forever."""
    create_topic(conn, "jdtp-zero", 2)
    R = SCHEMAS[DESCRIBE_TOPIC_PARTITIONS].request[0]
    resp = call(conn, R(topics=[R.TopicRequest(name="jdtp-zero")], response_partition_limit=0, cursor=None))
    (t,) = resp.topics
    assert [p.partition_index for p in t.partitions] == [0]
    assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == ("jdtp-zero", 1)
    results, _ = describe_topics_like_admin_client(conn, ["jdtp-zero"], 0)
    assert [p[0] for p in results["jdtp-zero"]["partitions"]] == [0, 1]


# ---- ListOffsets and OffsetForLeaderEpoch --------------------------------------------------------------------------

@pytest.mark.parametrize("client", CLIENTS)
def test_list_offsets_as_offset_fetcher_and_admin_client_read_them(conn, advertised, client):
    topic = f"jlo-{client}"
    create_topic(conn, topic, 2)
    t0 = int(time.time() * 1000) - 60_000
    # Offsets 0-2 at t0..t0+2, 3-4 at t0+1000.., 5 at t0+500 (timestamps need not grow within a partition).
    for values, stamps in (([b"a0", b"a1", b"a2"], [t0, t0 + 1, t0 + 2]), ([b"b0", b"b1"], [t0 + 1000, t0 + 1001]),
                           ([b"c0"], [t0 + 500])):
        assert produce(conn, topic, 0, batch(values, stamps)).error_code == NONE
    epoch = leader_epoch(conn, topic, 0)
    version = picked(advertised, client, LIST_OFFSETS)
    specs = [(0, EARLIEST), (0, LATEST), (0, t0 + 1), (0, t0 + 600), (0, t0 + 5000), (1, EARLIEST), (1, LATEST),
             (1, t0), (7, LATEST)]
    got = [(p.error_code, p.timestamp, p.offset, p.leader_epoch)
           for p in list_offsets(conn, version, topic, specs, current_leader_epoch=epoch)]
    assert got == [
        (NONE, -1, 0, epoch),            # earliest: the log start offset
        (NONE, -1, 6, epoch),            # latest: the high watermark, with the current leader epoch
        (NONE, t0 + 1, 1, epoch),        # first record with timestamp >= t0+1
        (NONE, t0 + 1000, 3, epoch),     # the first batch holding a timestamp >= t0+600, its first such record
        (NONE, -1, -1, -1),              # no record that late: offset -1 (Spark: no match), not an error
        (NONE, -1, 0, epoch),
        (NONE, -1, 0, epoch),
        (NONE, -1, -1, -1),
        (UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1),
    ]
    if version >= 7:  # OffsetSpec.maxTimestamp(): the record with the largest timestamp
        (p,) = list_offsets(conn, version, topic, [(0, MAX_TIMESTAMP)])
        assert (p.error_code, p.timestamp, p.offset) == (NONE, t0 + 1001, 4)
    (p,) = list_offsets(conn, version, topic, [(0, LATEST)], isolation_level=READ_COMMITTED)
    assert (p.error_code, p.offset) == (NONE, 6)  # the last stable offset
    # A client ahead of the broker's leader epoch gets a retriable error (OffsetFetcherUtils retries it).
    (p,) = list_offsets(conn, version, topic, [(0, LATEST)], current_leader_epoch=epoch + 1)
    assert (p.error_code, p.offset) == (UNKNOWN_LEADER_EPOCH, -1)
    # After Admin.deleteRecords, earliest is the new log start offset.
    D = SCHEMAS[DELETE_RECORDS].request[picked(advertised, client, DELETE_RECORDS)]
    deleted = call(conn, D(topics=[D.DeleteRecordsTopic(name=topic, partitions=[
        D.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=2)])], timeout_ms=30000))
    assert (deleted.topics[0].partitions[0].error_code, deleted.topics[0].partitions[0].low_watermark) == (NONE, 2)
    (p,) = list_offsets(conn, version, topic, [(0, EARLIEST)], current_leader_epoch=epoch)
    assert (p.error_code, p.timestamp, p.offset, p.leader_epoch) == (NONE, -1, 2, epoch)


def test_offset_for_leader_epoch_as_consumer_validation_reads_it(conn, advertised):
    """SubscriptionState.maybeCompleteValidation: no truncation while end offset >= position."""
    topic = "jofle"
    create_topic(conn, topic, 2)
    for values in ([b"x"] * 4, [b"y"] * 3):
        assert produce(conn, topic, 0, batch(values)).error_code == NONE
    epoch = leader_epoch(conn, topic, 0)
    version = picked(advertised, "4.0", OFFSET_FOR_LEADER_EPOCH)
    R = SCHEMAS[OFFSET_FOR_LEADER_EPOCH].request[version]
    P = R.OffsetForLeaderTopic.OffsetForLeaderPartition

    def ask(topic_name, parts):
        resp = call(conn, R(replica_id=-1, topics=[R.OffsetForLeaderTopic(topic=topic_name, partitions=[
            P(partition=p, current_leader_epoch=current, leader_epoch=asked) for p, current, asked in parts])]))
        (t,) = resp.topics
        assert t.topic == topic_name
        return [(e.partition, e.error_code, e.leader_epoch, e.end_offset) for e in t.partitions]

    assert ask(topic, [(0, epoch, epoch), (1, epoch, epoch), (0, epoch, epoch + 3), (1, epoch + 1, epoch)]) == [
        (0, NONE, epoch, 7),       # the current epoch ends at the log end offset
        (1, NONE, epoch, 0),
        (0, NONE, -1, -1),         # an epoch the leader never had: undefined (the consumer resets or fails)
        (1, UNKNOWN_LEADER_EPOCH, -1, -1),
    ]
    assert ask("jofle-absent", [(0, 0, 0)]) == [(0, UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]


# ---- Fetch ---------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fetch_topic(kafka) -> tuple[str, uuid.UUID, dict]:
    """'jfetch': partition 0 holds three batches of five records, 1 is empty, 2 holds one 20 KB batch."""
    with RawConnection(kafka.bootstrap_servers) as c:
        topic_id = create_topic(c, "jfetch", 3)
        expected = {0: [], 1: [], 2: []}
        for b in range(3):
            values = [f"p0-{b}-{i}".encode() for i in range(5)]
            assert produce(c, "jfetch", 0, batch(values)).error_code == NONE
            expected[0] += values
        big = [bytes(range(256)) * 16 for _ in range(5)]
        assert produce(c, "jfetch", 2, batch(big)).error_code == NONE
        expected[2] = big
    return "jfetch", topic_id, expected


@pytest.mark.parametrize("client", ["3.4", "3.5", "3.7", "3.9", "newest"])  # Fetch v13, 15, 16, 17, 18
def test_full_fetch_by_topic_id_as_fetch_session_handler_expects(conn, advertised, fetch_topic, client):
    name, topic_id, expected = fetch_topic
    version = picked(advertised, client, FETCH)
    assert version >= 13  # the Java client uses topic ids whenever the broker's Fetch has them
    epoch = leader_epoch(conn, name, 0)
    request = [(name, topic_id, [(p, 0, MAX_PARTITION_FETCH_BYTES, epoch) for p in (0, 1, 2)])]
    resp = fetch(conn, version, request)
    assert resp.throttle_time_ms == 0
    for t in resp.responses:
        assert t.topic_id == topic_id and not t.topic
    got = fetched_partitions(resp, version, request)
    assert_partition_ok(got[(name, 0)], high_watermark=15)
    assert_partition_ok(got[(name, 1)], high_watermark=0)
    assert_partition_ok(got[(name, 2)], high_watermark=5)
    assert values_of(got[(name, 0)].records) == list(enumerate(expected[0]))
    assert got[(name, 1)].records in (b"", None)
    assert values_of(got[(name, 2)].records) == list(enumerate(expected[2]))
    for p in got.values():
        assert p.current_leader is None or (p.current_leader.leader_id, p.current_leader.leader_epoch) == (-1, -1)
    if version >= 16:
        assert not resp.node_endpoints  # only sent with a leader change
    # The consumer's next poll: position 15 on partition 0; a full fetch again, as the session id was 0.
    again = fetch(conn, version, [(name, topic_id, [(0, 15, MAX_PARTITION_FETCH_BYTES, epoch)])], max_wait_ms=50)
    (p,) = fetched_partitions(again, version, [(name, topic_id, [(0, 15, 0, epoch)])]).values()
    assert_partition_ok(p, high_watermark=15)
    assert not p.records


def test_fetch_session_close_is_answered(conn, advertised, fetch_topic):
    """On close the consumer sends session 0, epoch -1 (FINAL) without partitions; it only needs an answer."""
    version = picked(advertised, "4.0", FETCH)
    resp = fetch(conn, version, [], session_epoch=-1, max_wait_ms=0)
    assert (resp.error_code, resp.session_id, resp.responses) == (NONE, 0, [])


def test_fetch_without_topic_ids_uses_names(conn, fetch_topic):
    """With a partition lacking a topic id the Java client caps Fetch at v12, by name."""
    name, topic_id, expected = fetch_topic
    request = [(name, topic_id, [(0, 0, MAX_PARTITION_FETCH_BYTES, -1), (2, 0, MAX_PARTITION_FETCH_BYTES, 5)])]
    resp = fetch(conn, 12, request)
    assert [t.topic for t in resp.responses] == [name]
    got = fetched_partitions(resp, 12, request)
    assert_partition_ok(got[(name, 0)], high_watermark=15)
    assert values_of(got[(name, 0)].records) == list(enumerate(expected[0]))
    # A leader epoch newer than the broker's: UNKNOWN_LEADER_EPOCH, which FetchCollector only logs.
    assert (got[(name, 2)].error_code, got[(name, 2)].records) in ((UNKNOWN_LEADER_EPOCH, b""),
                                                                   (UNKNOWN_LEADER_EPOCH, None))


def test_fetch_sizes_never_leave_the_consumer_without_a_whole_batch(conn, advertised, fetch_topic):
    """KIP-74: the first partition answers at least one whole batch whatever the limits; every other partition
    answers nothing or whole batches (a non-empty answer without a complete batch is a KafkaException in Java)."""
    name, topic_id, expected = fetch_topic
    version = picked(advertised, "4.0", FETCH)
    small = [(name, topic_id, [(2, 0, 100, -1)])]
    (p,) = fetched_partitions(fetch(conn, version, small), version, small).values()
    assert values_of(p.records) == list(enumerate(expected[2]))
    both = [(name, topic_id, [(0, 0, MAX_PARTITION_FETCH_BYTES, -1), (2, 0, MAX_PARTITION_FETCH_BYTES, -1)])]
    got = fetched_partitions(fetch(conn, version, both, max_bytes=100), version, both)
    assert values_of(got[(name, 0)].records)[:5] == list(enumerate(expected[0][:5]))
    assert_partition_ok(got[(name, 0)], high_watermark=15)
    assert_partition_ok(got[(name, 2)], high_watermark=5)
    # After a partition with data, a later partition's limit smaller than its first batch: Kafka answers nothing
    # there (it drops an incomplete first entry), never a lone partial batch.
    later = [(name, topic_id, [(0, 0, MAX_PARTITION_FETCH_BYTES, -1), (2, 0, 100, -1)])]
    got = fetched_partitions(fetch(conn, version, later), version, later)
    assert values_of(got[(name, 0)].records) == list(enumerate(expected[0]))
    assert_partition_ok(got[(name, 2)], high_watermark=5)
    # A partition limit that ends inside the second batch: the first batch whole, the rest at most a partial tail.
    first_size = batches(got[(name, 0)].records)[0].size_in_bytes
    cut = [(name, topic_id, [(0, 0, first_size + 20, -1)])]
    (p,) = fetched_partitions(fetch(conn, version, cut), version, cut).values()
    assert values_of(p.records) == list(enumerate(expected[0][:5]))


def test_fetch_inside_a_batch_returns_the_whole_batch(conn, advertised, fetch_topic):
    name, topic_id, expected = fetch_topic
    version = picked(advertised, "4.0", FETCH)
    request = [(name, topic_id, [(0, 7, MAX_PARTITION_FETCH_BYTES, -1)])]
    (p,) = fetched_partitions(fetch(conn, version, request), version, request).values()
    first = batches(p.records)[0]
    assert first.base_offset == 5 and first.last_offset >= 7
    assert values_of(p.records, from_offset=7) == [(i, expected[0][i]) for i in range(7, 15)]


def test_fetch_topic_split_over_entries(conn, advertised, fetch_topic):
    """FetchRequest.Builder groups only consecutive partitions of a topic, so a topic may come in two entries."""
    name, topic_id, expected = fetch_topic
    other_id = create_topic(conn, "jfetch-other", 1)
    version = picked(advertised, "4.0", FETCH)
    request = [(name, topic_id, [(0, 10, MAX_PARTITION_FETCH_BYTES, -1)]),
               ("jfetch-other", other_id, [(0, 0, MAX_PARTITION_FETCH_BYTES, -1)]),
               (name, topic_id, [(2, 0, MAX_PARTITION_FETCH_BYTES, -1)])]
    resp = fetch(conn, version, request)
    got = fetched_partitions(resp, version, request)
    assert values_of(got[(name, 0)].records, from_offset=10) == [(i, expected[0][i]) for i in range(10, 15)]
    assert values_of(got[(name, 2)].records) == list(enumerate(expected[2]))
    assert_partition_ok(got[("jfetch-other", 0)], high_watermark=0)


def test_fetch_unknown_topic_id_and_out_of_range(conn, advertised, fetch_topic):
    name, topic_id, _ = fetch_topic
    version = picked(advertised, "4.0", FETCH)
    stranger = uuid.uuid4()
    request = [(name, topic_id, [(0, 16, MAX_PARTITION_FETCH_BYTES, -1), (1, 0, MAX_PARTITION_FETCH_BYTES, -1)]),
               ("unknown", stranger, [(0, 0, MAX_PARTITION_FETCH_BYTES, -1)])]
    got = fetched_partitions(fetch(conn, version, request, max_wait_ms=0), version, request)
    # Past the log end: OFFSET_OUT_OF_RANGE, which Spark's consumer (auto.offset.reset=none) turns into its
    # OffsetOutOfRangeException handling.
    assert got[(name, 0)].error_code == OFFSET_OUT_OF_RANGE and not got[(name, 0)].records
    assert_partition_ok(got[(name, 1)], high_watermark=0)
    unknown = got[("unknown", 0)]
    assert (unknown.error_code, unknown.high_watermark) == (UNKNOWN_TOPIC_ID, -1) and not unknown.records


def test_fetch_below_log_start_offset(conn, advertised):
    topic_id = create_topic(conn, "jfetch-trimmed", 1)
    for values in ([b"a"] * 5, [b"b"] * 5):
        assert produce(conn, "jfetch-trimmed", 0, batch(values)).error_code == NONE
    D = SCHEMAS[DELETE_RECORDS].request[2]
    call(conn, D(topics=[D.DeleteRecordsTopic(name="jfetch-trimmed", partitions=[
        D.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=5)])], timeout_ms=30000))
    version = picked(advertised, "4.0", FETCH)
    request = [("jfetch-trimmed", topic_id, [(0, 0, MAX_PARTITION_FETCH_BYTES, -1)])]
    (p,) = fetched_partitions(fetch(conn, version, request, max_wait_ms=0), version, request).values()
    assert p.error_code == OFFSET_OUT_OF_RANGE
    request = [("jfetch-trimmed", topic_id, [(0, 5, MAX_PARTITION_FETCH_BYTES, -1)])]
    (p,) = fetched_partitions(fetch(conn, version, request), version, request).values()
    assert_partition_ok(p, high_watermark=10, log_start_offset=5)  # SubscriptionState.tryUpdatingLogStartOffset
    assert [o for o, _ in values_of(p.records, from_offset=5)] == list(range(5, 10))


@pytest.mark.parametrize("version", [12, 17])
def test_fetch_partition_error_keeps_the_response_whole(kafka, conn, fetch_topic, version):
    """A partition in error is still in the full fetch response, under its topic (id), with the fields AbstractFetch
    reads for NOT_LEADER_OR_FOLLOWER (current leader -1/-1: refresh metadata), so the rest of it is used."""
    name, topic_id, expected = fetch_topic
    control = ControlClient(kafka.bootstrap_servers)
    control.call("fault.add", kind="error", api="Fetch", error="NOT_LEADER_OR_FOLLOWER", count=1, topic=name,
                 partition=2)
    request = [(name, topic_id, [(0, 0, MAX_PARTITION_FETCH_BYTES, -1), (2, 0, MAX_PARTITION_FETCH_BYTES, -1)])]
    try:
        got = fetched_partitions(fetch(conn, version, request), version, request)
    finally:
        control.call("fault.clear")  # an unspent rule must not reach the next test
    assert values_of(got[(name, 0)].records) == list(enumerate(expected[0]))
    failed = got[(name, 2)]
    assert failed.error_code == NOT_LEADER_OR_FOLLOWER and not failed.records
    assert failed.preferred_read_replica == -1
    leader = failed.current_leader
    assert leader is None or (leader.leader_id, leader.leader_epoch) == (-1, -1) or leader.leader_id == 1


# ---- the idempotent producer ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("client", CLIENTS)
def test_idempotent_producer_as_transaction_manager_expects(conn, advertised, client):
    topic = f"jidem-{client}"
    topic_id = create_topic(conn, topic, 2)
    produce_version = picked(advertised, client, PRODUCE)
    init_producer_id = SCHEMAS[INIT_PRODUCER_ID].request[picked(advertised, client, INIT_PRODUCER_ID)]
    init = call(conn, init_producer_id(transactional_id=None, transaction_timeout_ms=INT32_MAX,
                                       producer_id=-1, producer_epoch=-1))
    assert (init.error_code, init.producer_epoch, init.throttle_time_ms) == (NONE, 0, 0)
    pid = init.producer_id
    assert pid >= 0

    def send(partition, values, epoch, seq):
        return produce(conn, topic, partition, batch(values, producer=(pid, epoch, seq)), produce_version, topic_id)

    first = send(0, [b"0", b"1", b"2", b"3", b"4"], 0, 0)
    assert (first.error_code, first.base_offset, first.log_append_time_ms, first.log_start_offset) == (NONE, 0, -1, 0)
    assert first.record_errors == [] and first.error_message is None
    assert send(1, [b"only"], 0, 0).base_offset == 0  # sequences are per partition
    second_records = batch([b"5", b"6", b"7", b"8", b"9"], producer=(pid, 0, 5))
    assert produce(conn, topic, 0, second_records, produce_version, topic_id).base_offset == 5
    # A retry of an appended batch (its response was lost) is acknowledged with the original offset, not stored twice.
    retry = produce(conn, topic, 0, second_records, produce_version, topic_id)
    assert retry.error_code in (NONE, DUPLICATE_SEQUENCE_NUMBER) and retry.base_offset == 5
    gap = send(0, [b"lost"], 0, 20)
    assert (gap.error_code, gap.base_offset) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    # TransactionManager.bumpIdempotentProducerEpoch: same producer id, epoch + 1, sequences from 0 again.
    bumped = send(0, [b"10"], 1, 0)
    assert (bumped.error_code, bumped.base_offset) == (NONE, 10)
    assert send(0, [b"late"], 0, 10).error_code == INVALID_PRODUCER_EPOCH
    (end,) = list_offsets(conn, picked(advertised, client, LIST_OFFSETS), topic, [(0, LATEST)])
    assert end.offset == 11
    request = [(topic, topic_id, [(0, 0, MAX_PARTITION_FETCH_BYTES, -1)])]
    version = picked(advertised, client, FETCH)
    (p,) = fetched_partitions(fetch(conn, version, request), version, request).values()
    assert [(b.base_offset, b.producer_id, b.producer_epoch, b.base_sequence) for b in batches(p.records)] == [
        (0, pid, 0, 0), (5, pid, 0, 5), (10, pid, 1, 0)]
    # KIP-360's InitProducerId with the current id and epoch: an idempotent producer gets a fresh identity.
    again = call(conn, init_producer_id(transactional_id=None, transaction_timeout_ms=INT32_MAX,
                                        producer_id=pid, producer_epoch=1))
    assert again.error_code == NONE and again.producer_id not in (-1, pid) and again.producer_epoch == 0
