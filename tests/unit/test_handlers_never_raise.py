"""No request can raise inside a handler: for every request schema and version the broker serves, requests with a
null wherever the wire can carry one, integers at their limits and names of things that exist are either refused at
decoding (the connection closes, as Kafka's does when it cannot parse a request) or answered with a response that
parses. One broker, in this process, takes them all; its request processing is called directly, so an exception is
seen where it is raised rather than as a closed connection."""
from __future__ import annotations

import struct
import threading
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin.topics import CreateTopicsRequest, DeleteTopicsRequest
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest

from minikafka.broker.coordinator.group.offset_manager import MAX_TIMESTAMP_MS
from minikafka.broker.kafka_node import KafkaNode
from minikafka.broker.network.socket_server import CloseConnection, ConnectionInfo
from minikafka.broker_handle import TEST_DEFAULTS
from minikafka.config import BrokerConfig
from minikafka.protocol.codec import SCHEMAS, InvalidRequestError, RequestHeader, decode_request
from minikafka.protocol.errors import ErrorCode
from tests.raw_client import record_batch
from tests.unit.request_strategies import SERVED_VERSIONS, RequestValues, request_frame

EXAMPLES_PER_VERSION = 24
# A generated request not answered within this long counts as waiting in a purgatory (a long poll, a rebalance),
# which is no failure; if it answers later, it must not have raised either (looked at after every later request).
ANSWER_WAIT_S = 0.3
# How long a request the test needs answered may take (under load, too).
ANSWER_TIMEOUT_S = 60.0
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0

TOPIC = "t"
GROUP = "g"
PARTITIONS = 2
CONNECTION = ConnectionInfo(1, "127.0.0.1:1", "PLAINTEXT")


class Outcome:
    """What became of one request frame."""

    def __init__(self, frame: bytes) -> None:
        self.frame = frame
        self.done = trio.Event()
        self.finished = False  # answered, closed or raised (not still waiting, not cancelled)
        self.response: bytes | None = None
        self.closed: str | None = None
        self.error: str | None = None


class ThreadedBroker:
    """A combined node (broker and controller) on a thread with its own trio loop; `process` hands a request frame
    to its request processing, as a connection does, and waits for the outcome at most `wait_s`."""

    def __init__(self, data_dir: Path) -> None:
        self.config = BrokerConfig({**TEST_DEFAULTS, "node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0",
                                    "log.dirs": str(data_dir)})
        self.node: KafkaNode | None = None
        self.waiting: list[Outcome] = []
        self._token: trio.lowlevel.TrioToken | None = None
        self._requests: trio.Nursery | None = None
        self._stopping: trio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="broker-under-test", daemon=True)

    def start(self) -> None:
        self._thread.start()
        assert self._ready.wait(START_TIMEOUT_S), "the broker did not start"
        if self._failure is not None:
            raise self._failure

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # noqa: BLE001 - reported to the test's thread
            self._failure = exc
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stopping = trio.Event()
        self.node = KafkaNode(self.config)
        async with trio.open_nursery() as nursery:
            await nursery.start(self.node.run)
            async with trio.open_nursery() as requests:
                self._requests = requests
                self._ready.set()
                await self._stopping.wait()
                requests.cancel_scope.cancel()
            self.node.stop()

    def process(self, frame: bytes, wait_s: float) -> Outcome:
        outcome = trio.from_thread.run(self._process, frame, wait_s, trio_token=self._token)
        if not outcome.finished:
            self.waiting.append(outcome)
        return outcome

    async def _process(self, frame: bytes, wait_s: float) -> Outcome:
        outcome = Outcome(frame)
        assert self._requests is not None
        self._requests.start_soon(self._answer, outcome)
        with trio.move_on_after(wait_s):
            await outcome.done.wait()
        return outcome

    async def _answer(self, outcome: Outcome) -> None:
        assert self.node is not None and self.node.broker is not None
        try:
            outcome.response = await self.node.broker.request_channel.process(outcome.frame, CONNECTION)
            outcome.finished = True
        except CloseConnection as exc:
            outcome.closed = str(exc)
            outcome.finished = True
        except Exception:  # noqa: BLE001 - what this test looks for: any escape from a handler, reported
            outcome.error = traceback.format_exc()
            outcome.finished = True
        finally:
            outcome.done.set()

    def wait_for(self, outcome: Outcome, timeout_s: float) -> None:
        """Until `outcome` is finished, at most `timeout_s`."""
        trio.from_thread.run(self._wait_for, outcome, timeout_s, trio_token=self._token)
        if outcome.finished and outcome in self.waiting:
            self.waiting.remove(outcome)

    @staticmethod
    async def _wait_for(outcome: Outcome, timeout_s: float) -> None:
        with trio.move_on_after(timeout_s):
            await outcome.done.wait()

    def stop(self) -> None:
        if self._token is not None and self._thread.is_alive():
            assert self._stopping is not None
            trio.from_thread.run_sync(self._stopping.set, trio_token=self._token)
        self._thread.join(STOP_TIMEOUT_S)
        assert not self._thread.is_alive(), "the broker did not stop"
        if self._failure is not None:
            raise self._failure


def _answer(outcome: Outcome):
    """The response of an answered request, parsed with its schema."""
    assert outcome.error is None, outcome.error
    assert outcome.finished and outcome.closed is None, outcome.closed
    assert outcome.response is not None
    header, _ = RequestHeader.parse(outcome.frame)
    schema = SCHEMAS[header.api_key]
    response = bytes(outcome.response)  # a fetch response's records may be file slices
    (correlation_id,) = struct.unpack_from(">i", response, 4)
    assert correlation_id == header.correlation_id
    body = 8 + schema.response_header_version(header.api_version)
    return schema.response.decode(memoryview(response)[body:], version=header.api_version)


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[ThreadedBroker]:
    """The broker every test here sends to; requests that waited and have answered since may not have raised
    either (those still waiting when the tests are done are cancelled as the broker stops)."""
    running = ThreadedBroker(tmp_path_factory.mktemp("handlers-never-raise"))
    running.start()
    try:
        yield running
        assert not [o.error for o in running.waiting if o.error is not None]
    finally:
        running.stop()


@pytest.fixture
def topic_id(broker: ThreadedBroker) -> uuid.UUID:
    """The id of a topic of two partitions holding records, with an offset committed by a group, so that requests
    naming them get past the first lookups; created again when a test before has deleted it."""
    T = CreateTopicsRequest[5].CreatableTopic
    created = _answer(broker.process(request_frame(CreateTopicsRequest[5](
        topics=[T(name=TOPIC, num_partitions=PARTITIONS, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=30000, validate_only=False)), ANSWER_TIMEOUT_S))
    if created.topics[0].error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
        assert created.topics[0].error_code == ErrorCode.NONE
        PT = ProduceRequest[9].TopicProduceData
        for partition in range(PARTITIONS):
            produced = _answer(broker.process(request_frame(ProduceRequest[9](
                transactional_id=None, acks=1, timeout_ms=30000, topic_data=[PT(name=TOPIC, partition_data=[
                    PT.PartitionProduceData(index=partition, records=record_batch([b"a", b"b", b"c"]))])])),
                ANSWER_TIMEOUT_S))
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        _commit(broker, 8, -1)
    T = MetadataRequest[12].MetadataRequestTopic
    metadata = _answer(broker.process(request_frame(MetadataRequest[12](
        topics=[T(topic_id=None, name=TOPIC)], allow_auto_topic_creation=False,
        include_topic_authorized_operations=False)), ANSWER_TIMEOUT_S))
    return metadata.topics[0].topic_id


def _commit(broker: ThreadedBroker, version: int, retention_ms: int):
    T = OffsetCommitRequest[version].OffsetCommitRequestTopic
    request = OffsetCommitRequest[version](
        group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        retention_time_ms=retention_ms, topics=[T(name=TOPIC, partitions=[T.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=2, committed_leader_epoch=-1, committed_metadata="m")])])
    return _answer(broker.process(request_frame(request), ANSWER_TIMEOUT_S))


@pytest.mark.parametrize("version", [2, 4])
def test_offset_commit_with_the_longest_retention_is_kept(broker, topic_id, version):
    """A retention of 2^63-1 ms used to overflow the offset's record; Kafka's sum wraps into the past, which
    would expire the offset at once: it is kept as never expiring."""
    committed = _commit(broker, version, (1 << 63) - 1)
    assert committed.topics[0].partitions[0].error_code == ErrorCode.NONE
    T = OffsetFetchRequest[5].OffsetFetchRequestTopic
    fetched = _answer(broker.process(request_frame(OffsetFetchRequest[5](
        group_id=GROUP, topics=[T(name=TOPIC, partition_indexes=[0])], require_stable=False)), ANSWER_TIMEOUT_S))
    assert fetched.topics[0].partitions[0].committed_offset == 2
    assert broker.node is not None and broker.node.broker is not None
    group = broker.node.broker.group_coordinator.groups[GROUP]
    assert group.offsets[(TOPIC, 0)].expire_timestamp == MAX_TIMESTAMP_MS


def test_a_produce_with_a_null_topic_data_array_closes_the_connection(broker):
    # Produce v9: header tags, transactional_id null, acks, timeout_ms, topic_data null (compact 0), body tags.
    frame = RequestHeader(0, 9, 5, "tester").encode() + b"\x00\x00" + struct.pack(">hi", 1, 1000) + b"\x00\x00"
    outcome = broker.process(frame, ANSWER_TIMEOUT_S)
    assert outcome.finished and outcome.error is None
    assert outcome.closed is not None and "non-nullable field TopicData" in outcome.closed


@pytest.mark.parametrize("by", ["name twice", "name and id"])
def test_delete_topics_naming_a_topic_twice_deletes_nothing(broker, topic_id, by):
    """Found by the property below: each naming deleted the topic, and the second removal could not be replayed
    (the controller's metadata log then held a record it refused). As Kafka: INVALID_REQUEST, nothing deleted."""
    T = DeleteTopicsRequest[6].DeleteTopicState
    second = T(name=TOPIC, topic_id=None) if by == "name twice" else T(name=None, topic_id=topic_id)
    deleted = _answer(broker.process(request_frame(DeleteTopicsRequest[6](
        topics=[T(name=TOPIC, topic_id=None), second], timeout_ms=30000)), ANSWER_TIMEOUT_S))
    assert [r.error_code for r in deleted.responses] == [ErrorCode.INVALID_REQUEST] * 2
    assert broker.node is not None and broker.node.controller is not None
    assert TOPIC in broker.node.controller.image.topics


def test_a_request_that_waits_is_answered_when_its_condition_holds(broker, topic_id):
    """A long poll waits past the time a generated request is given, which is no failure; it answers once its
    condition holds."""
    T = FetchRequest[4].FetchTopic
    longest = (1 << 31) - 1

    def fetch(offset: int, max_wait_ms: int) -> bytes:
        return request_frame(FetchRequest[4](
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=longest, isolation_level=0,
            topics=[T(topic=TOPIC, partitions=[T.FetchPartition(partition=0, fetch_offset=offset,
                                                                partition_max_bytes=longest)])]))

    end = _answer(broker.process(fetch(0, 0), ANSWER_TIMEOUT_S)).responses[0].partitions[0].high_watermark
    waiting = broker.process(fetch(end, longest), ANSWER_WAIT_S)
    assert not waiting.finished and waiting in broker.waiting
    PT = ProduceRequest[9].TopicProduceData
    produced = _answer(broker.process(request_frame(ProduceRequest[9](
        transactional_id=None, acks=1, timeout_ms=30000, topic_data=[PT(name=TOPIC, partition_data=[
            PT.PartitionProduceData(index=0, records=record_batch([b"late"]))])])), ANSWER_TIMEOUT_S))
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    broker.wait_for(waiting, ANSWER_TIMEOUT_S)
    fetched = _answer(waiting).responses[0].partitions[0]
    assert fetched.error_code == ErrorCode.NONE and fetched.high_watermark == end + 1 and fetched.records


# Amounts whose limits are covered elsewhere: partitions to create (each is a directory and files on disk).
SMALL = ("num_partitions", "replication_factor", "count")
# Values that get a request past its handler's first checks, drawn as often as arbitrary ones.
LIKELY = {
    "acks": [-1, 0, 1],
    "partition": [0, 1], "partition_index": [0, 1], "index": [0, 1], "partitions": [0, 1],
    "partition_indexes": [0, 1], "partition_id": [0, 1],
    "session_id": [0], "session_epoch": [-1, 0], "isolation_level": [0, 1], "replica_id": [-1],
    "fetch_offset": [0, 3], "offset": [-1, 0, 1], "committed_offset": [0, 1], "timestamp": [-2, -1, 0],
    "current_leader_epoch": [-1, 0], "leader_epoch": [-1, 0], "committed_leader_epoch": [-1, 0],
    "session_timeout_ms": [6000, 10000], "rebalance_timeout_ms": [0, 1000], "generation_id": [-1, 0, 1],
    "generation_id_or_member_epoch": [-1, 0, 1], "retention_time_ms": [-1, 1000],
    "min_bytes": [0, 1], "max_wait_ms": [0, 100], "timeout_ms": [0, 1000],
    "key_type": [0, 1], "resource_type": [2, 4], "election_type": [0, 1],
}
_PROPERTY = settings(max_examples=EXAMPLES_PER_VERSION, deadline=None, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                            HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize(("api_key", "version"), SERVED_VERSIONS, ids=lambda v: getattr(v, "api_name", f"v{v}"))
def test_no_request_raises_inside_a_handler(broker, topic_id, api_key, version):
    def values(nulls_anywhere: bool) -> RequestValues:
        return RequestValues(names=[TOPIC, GROUP, "__consumer_offsets", ""], topic_ids=[topic_id],
                             batches=[record_batch([b"v"]), record_batch([b"v", b"w"], compression=1)],
                             likely=LIKELY, small=SMALL, nulls_anywhere=nulls_anywhere)

    # Half with nulls anywhere (mostly refused), half with nulls only where allowed (all reach their handler).
    requests = values(True).request(api_key, version) | values(False).request(api_key, version)
    schema = SCHEMAS[api_key]

    @_PROPERTY
    @given(requests, st.integers(-(1 << 31), (1 << 31) - 1), st.none() | st.text(max_size=8))
    def check(request, correlation_id, client_id):
        frame = request_frame(request, correlation_id, client_id)
        header, body = RequestHeader.parse(frame)
        try:
            decode_request(schema, header, frame, body)
            parses = True
        except InvalidRequestError:
            parses = False
        outcome = broker.process(frame, ANSWER_WAIT_S)
        assert outcome.error is None, outcome.error
        if not parses:
            assert outcome.finished and outcome.closed is not None and "cannot decode" in outcome.closed
        elif outcome.finished and outcome.closed is None and outcome.response is not None:
            _answer(outcome)
        # Requests that were waiting may have been answered meanwhile: none of them may have raised either.
        assert not [o.error for o in broker.waiting if o.error is not None]

    check()
