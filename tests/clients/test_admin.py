"""Admin API compatibility: topic, partition, config and record administration through each client's admin API.

Every test body runs against kafka-python's KafkaAdminClient, confluent-kafka's AdminClient and aiokafka's
AIOKafkaAdminClient through a thin adapter that reports Kafka error codes, so one assertion states one
behaviour for all three. Records are written and read with kafka-python, the admin API being what is tested.
"""
from __future__ import annotations

import asyncio
import re
from typing import NamedTuple

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.producer.produce import ProduceRequest

from tests.helpers import create_topic, produce
from tests.raw_client import RawConnection, record_batch

NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUEST = 42
MESSAGE_TOO_LARGE = 10
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
INVALID_TOPIC_EXCEPTION = 17

DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
NODE_ID = 1  # node.id's default, which the test brokers keep


class PartitionInfo(NamedTuple):
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class ConfigInfo(NamedTuple):
    value: str | None
    source: int


# ---- adapters: one per client, same methods, Kafka error codes out ------------------------------------------------

class KafkaPythonAdmin:
    def __init__(self, bootstrap: str) -> None:
        from kafka import KafkaAdminClient
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)

    def close(self) -> None:
        self.admin.close()

    def create_topic(self, name: str, partitions: int = -1, replication_factor: int = -1,
                     configs: dict[str, str] | None = None, validate_only: bool = False) -> int:
        spec = {"num_partitions": partitions, "replication_factor": replication_factor, "configs": configs or {}}
        result = self.admin.create_topics({name: spec}, validate_only=validate_only, raise_errors=False)
        (topic,) = result["topics"]
        return topic["error_code"]

    def describe_topic(self, name: str) -> dict[int, PartitionInfo] | int:
        (topic,) = self.admin.describe_topics([name])
        if topic["error_code"]:
            return topic["error_code"]
        return {p["partition_index"]: PartitionInfo(p["leader_id"], tuple(p["replica_nodes"]), tuple(p["isr_nodes"]))
                for p in topic["partitions"]}

    def topic_names(self) -> set[str]:
        return set(self.admin.list_topics())

    def describe_configs(self, name: str) -> dict[str, ConfigInfo]:
        from kafka.admin import ConfigResource, ConfigSourceType
        result = self.admin.describe_configs([ConfigResource("TOPIC", name)], config_filter="all")
        return {k: ConfigInfo(v["value"], ConfigSourceType[v["config_source"]].value)
                for k, v in result["topic"][name].items()}

    def alter_configs(self, name: str, set_: dict[str, str], delete: tuple[str, ...] = ()) -> int:
        from kafka.admin import AlterConfigOp, ConfigResource
        changes = {k: (AlterConfigOp.SET, v) for k, v in set_.items()}
        changes.update({k: (AlterConfigOp.DELETE, None) for k in delete})
        result = self.admin.alter_configs([ConfigResource("TOPIC", name, changes)], raise_on_unknown=False,
                                          incremental=True)
        outcome = result["topic"][name]
        if outcome == "OK":
            return NONE
        found = re.match(r"\[Error (-?\d+)\]", outcome)
        assert found, outcome
        return int(found.group(1))

    def create_partitions(self, name: str, count: int) -> int:
        response = self.admin.create_partitions({name: count}, raise_errors=False)
        (result,) = response.results
        return result.error_code

    def delete_topic(self, name: str) -> int:
        (topic,) = self.admin.delete_topics([name], raise_errors=False)["topics"]
        return topic["error_code"]

    def delete_records(self, topic: str, before: dict[int, int]) -> dict[int, int] | int:
        from kafka.errors import KafkaError
        try:
            result = self.admin.delete_records({TopicPartition(topic, p): o for p, o in before.items()})
        except KafkaError as exc:
            return exc.errno
        return {tp.partition: r["low_watermark"] for tp, r in result.items()}


class ConfluentAdmin:
    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def close(self) -> None:
        # librdkafka's admin client has no close(): dropping the last reference destroys it (its threads and
        # connections), rather than whenever a collector breaks a traceback cycle that reaches this wrapper.
        del self.admin

    @staticmethod
    def _code(future) -> int:
        from confluent_kafka import KafkaException
        try:
            future.result(timeout=15)
        except KafkaException as exc:
            return exc.args[0].code()
        return NONE

    def create_topic(self, name: str, partitions: int = -1, replication_factor: int = -1,
                     configs: dict[str, str] | None = None, validate_only: bool = False) -> int:
        from confluent_kafka.admin import NewTopic
        futures = self.admin.create_topics([NewTopic(name, num_partitions=partitions,
                                                     replication_factor=replication_factor, config=configs or {})],
                                           validate_only=validate_only, request_timeout=10)
        return self._code(futures[name])

    def describe_topic(self, name: str) -> dict[int, PartitionInfo] | int:
        from confluent_kafka import KafkaException, TopicCollection
        future = self.admin.describe_topics(TopicCollection([name]), request_timeout=10)[name]
        try:
            description = future.result(timeout=15)
        except KafkaException as exc:
            return exc.args[0].code()
        return {p.id: PartitionInfo(p.leader.id, tuple(n.id for n in p.replicas), tuple(n.id for n in p.isr))
                for p in description.partitions}

    def topic_names(self) -> set[str]:
        return set(self.admin.list_topics(timeout=10).topics)

    def describe_configs(self, name: str) -> dict[str, ConfigInfo]:
        from confluent_kafka.admin import ConfigResource, ResourceType
        (future,) = self.admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)],
                                                request_timeout=10).values()
        return {k: ConfigInfo(e.value, int(e.source)) for k, e in future.result(timeout=15).items()}

    def alter_configs(self, name: str, set_: dict[str, str], delete: tuple[str, ...] = ()) -> int:
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
        (future,) = self.admin.incremental_alter_configs(
            [ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)], request_timeout=10).values()
        return self._code(future)

    def create_partitions(self, name: str, count: int) -> int:
        from confluent_kafka.admin import NewPartitions
        return self._code(self.admin.create_partitions([NewPartitions(name, count)], request_timeout=10)[name])

    def delete_topic(self, name: str) -> int:
        return self._code(self.admin.delete_topics([name], request_timeout=10)[name])

    def delete_records(self, topic: str, before: dict[int, int]) -> dict[int, int] | int:
        from confluent_kafka import KafkaException
        from confluent_kafka import TopicPartition as CTopicPartition
        futures = self.admin.delete_records([CTopicPartition(topic, p, o) for p, o in before.items()],
                                            request_timeout=10)
        out = {}
        for tp, future in futures.items():
            try:
                out[tp.partition] = future.result(timeout=15).low_watermark
            except KafkaException as exc:
                return exc.args[0].code()
        return out


class AiokafkaAdmin:
    """aiokafka's admin is asyncio; each call runs on this adapter's own event loop."""

    def __init__(self, bootstrap: str) -> None:
        from aiokafka.admin import AIOKafkaAdminClient
        self.loop = asyncio.new_event_loop()

        async def start():
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
            await admin.start()
            return admin

        self.admin = self.loop.run_until_complete(start())

    def _run(self, coro):
        return self.loop.run_until_complete(asyncio.wait_for(coro, 20))

    def close(self) -> None:
        self._run(self.admin.close())
        self.loop.close()

    def create_topic(self, name: str, partitions: int = -1, replication_factor: int = -1,
                     configs: dict[str, str] | None = None, validate_only: bool = False) -> int:
        from aiokafka.admin import NewTopic
        response = self._run(self.admin.create_topics([NewTopic(name, partitions, replication_factor,
                                                                topic_configs=configs or {})],
                                                      validate_only=validate_only))
        (result,) = response.topic_errors
        return result[1]

    def describe_topic(self, name: str) -> dict[int, PartitionInfo] | int:
        (topic,) = self._run(self.admin.describe_topics([name]))
        if topic["error_code"]:
            return topic["error_code"]
        return {p["partition"]: PartitionInfo(p["leader"], tuple(p["replicas"]), tuple(p["isr"]))
                for p in topic["partitions"]}

    def topic_names(self) -> set[str]:
        return set(self._run(self.admin.list_topics()))

    def describe_configs(self, name: str) -> dict[str, ConfigInfo]:
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
        (response,) = self._run(self.admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)]))
        (resource,) = response.to_object()["resources"]
        assert resource["error_code"] == NONE, resource
        return {e["config_names"]: ConfigInfo(e["config_value"], e["config_source"])
                for e in resource["config_entries"]}

    def create_partitions(self, name: str, count: int) -> int:
        from aiokafka.admin import NewPartitions
        from aiokafka.errors import KafkaError
        try:
            self._run(self.admin.create_partitions({name: NewPartitions(count)}))
        except KafkaError as exc:
            return exc.errno
        return NONE

    def delete_topic(self, name: str) -> int:
        response = self._run(self.admin.delete_topics([name]))
        (result,) = response.topic_error_codes
        return result[1]

    def delete_records(self, topic: str, before: dict[int, int]) -> dict[int, int] | int:
        from aiokafka.admin import RecordsToDelete
        from aiokafka.errors import KafkaError
        from aiokafka.structs import TopicPartition as ATopicPartition
        try:
            result = self._run(self.admin.delete_records(
                {ATopicPartition(topic, p): RecordsToDelete(o) for p, o in before.items()}))
        except KafkaError as exc:
            return exc.errno
        return {tp.partition: low for tp, low in result.items()}


ADMINS = {"kafka-python": KafkaPythonAdmin, "confluent": ConfluentAdmin, "aiokafka": AiokafkaAdmin}
# aiokafka alters configs only with the legacy AlterConfigs API (tested on its own below).
INCREMENTAL_ALTER_ADMINS = ["kafka-python", "confluent"]


def open_admin(kind: str, broker):
    return ADMINS[kind](broker.bootstrap_servers)


@pytest.fixture
def broker(broker_factory):
    """Every topic here is created explicitly: describing a missing topic must not auto-create it."""
    return broker_factory(auto_create_topics_enable="false")


@pytest.fixture(params=list(ADMINS))
def admin(request, broker):
    client = open_admin(request.param, broker)
    yield client
    client.close()


# ---- record helpers (kafka-python; the admin API is what is under test) ------------------------------------------

def produce_values(broker, topic: str, partition: int, values: list[bytes]) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_block_ms=10_000)
    try:
        futures = [producer.send(topic, value=v, partition=partition) for v in values]
        producer.flush(timeout=15)
        return [f.get(timeout=15).offset for f in futures]
    finally:
        producer.close(timeout=10)


def consume_from_beginning(broker, topic: str, partition: int, count: int) -> list[tuple[int, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    tp = TopicPartition(topic, partition)
    out: list[tuple[int, bytes]] = []
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        for _ in range(100):
            if len(out) >= count:
                break
            for messages in consumer.poll(timeout_ms=200).values():
                out.extend((m.offset, m.value) for m in messages)
    finally:
        consumer.close(autocommit=False)
    return out


def beginning_and_end(broker, topic: str, partitions: int) -> list[tuple[int, int]]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        begin, end = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
    finally:
        consumer.close(autocommit=False)
    return [(begin[tp], end[tp]) for tp in tps]


# ---- tests ----------------------------------------------------------------------------------------------------------

def test_create_describe_delete_recreate(admin, broker, unique_topic):
    assert admin.create_topic(unique_topic, 3, 1, {"retention.ms": "3600000"}) == NONE
    assert admin.describe_topic(unique_topic) == {p: PartitionInfo(NODE_ID, (NODE_ID,), (NODE_ID,)) for p in range(3)}
    assert unique_topic in admin.topic_names()
    assert produce_values(broker, unique_topic, 1, [b"old-0", b"old-1"]) == [0, 1]

    assert admin.delete_topic(unique_topic) == NONE
    assert unique_topic not in admin.topic_names()
    assert admin.describe_topic(unique_topic) == UNKNOWN_TOPIC_OR_PARTITION

    # The same name again is a new, empty topic.
    assert admin.create_topic(unique_topic, 2, 1) == NONE
    assert sorted(admin.describe_topic(unique_topic)) == [0, 1]
    assert produce_values(broker, unique_topic, 1, [b"new-0"]) == [0]
    assert consume_from_beginning(broker, unique_topic, 1, 1) == [(0, b"new-0")]
    assert beginning_and_end(broker, unique_topic, 2) == [(0, 0), (0, 1)]


def test_validate_only_creates_nothing(admin, unique_topic):
    assert admin.create_topic(unique_topic, 2, 1, {"retention.ms": "60000"}, validate_only=True) == NONE
    assert unique_topic not in admin.topic_names()
    assert admin.create_topic(unique_topic, 2, 1, {"retention.ms": "soon"}, validate_only=True) == INVALID_CONFIG
    assert admin.create_topic(unique_topic, 2, 3, validate_only=True) == INVALID_REPLICATION_FACTOR
    assert unique_topic not in admin.topic_names()
    assert admin.create_topic(unique_topic, 2, 1) == NONE


def test_create_topic_errors(admin, unique_topic):
    assert admin.create_topic(unique_topic, 1, 1) == NONE
    assert admin.create_topic(unique_topic, 1, 1) == TOPIC_ALREADY_EXISTS
    assert admin.create_topic(unique_topic + "-rf", 1, 3) == INVALID_REPLICATION_FACTOR
    assert admin.create_topic(unique_topic + "-rf", 1, 0) == INVALID_REPLICATION_FACTOR
    assert admin.create_topic(unique_topic + "-parts", 0, 1) == INVALID_PARTITIONS
    assert admin.create_topic(unique_topic + "-cfg", 1, 1, {"no.such.config": "1"}) == INVALID_CONFIG
    assert admin.create_topic(unique_topic + "-val", 1, 1, {"retention.ms": "soon"}) == INVALID_CONFIG
    assert admin.create_topic(unique_topic + "-val", 1, 1, {"cleanup.policy": "shred"}) == INVALID_CONFIG
    assert admin.create_topic(unique_topic + "-lag", 1, 1, {"cleanup.policy": "compact", "min.compaction.lag.ms": "5",
                                                          "max.compaction.lag.ms": "4"}) == INVALID_CONFIG
    # Kafka 4.1's minimum segment.bytes; tests take smaller segments through internal.segment.bytes.
    assert admin.create_topic(unique_topic + "-seg", 1, 1, {"segment.bytes": "1048575"}) == INVALID_CONFIG
    for illegal in ("bad/name", "..", "x" * 250):
        assert admin.create_topic(illegal, 1, 1) == INVALID_TOPIC_EXCEPTION, illegal
    assert {t for t in admin.topic_names() if not t.startswith("__")} == {unique_topic}  # internal topics aside


def test_create_with_broker_defaults(broker_factory, unique_topic):
    """Partitions and replication factor of -1 mean num.partitions and default.replication.factor (KIP-464)."""
    broker = broker_factory(num_partitions=3, auto_create_topics_enable="false")
    for kind in ("kafka-python", "confluent"):  # aiokafka's NewTopic insists on explicit numbers
        admin = open_admin(kind, broker)
        try:
            topic = f"{unique_topic}-{kind}"
            assert admin.create_topic(topic) == NONE, kind
            assert admin.describe_topic(topic) == {
                p: PartitionInfo(NODE_ID, (NODE_ID,), (NODE_ID,)) for p in range(3)}, kind
        finally:
            admin.close()


def test_delete_missing_topic(admin, unique_topic):
    assert admin.delete_topic(unique_topic) == UNKNOWN_TOPIC_OR_PARTITION


def test_describe_configs_sources(broker_factory, unique_topic):
    """A topic override is a topic config, a broker property a static broker config, the rest Kafka's defaults."""
    broker = broker_factory(log_segment_bytes=536870912, auto_create_topics_enable="false")
    for kind in ADMINS:
        admin = open_admin(kind, broker)
        try:
            topic = f"{unique_topic}-{kind}"
            assert admin.create_topic(topic, 1, 1, {"retention.ms": "3600000", "cleanup.policy": "compact"}) == NONE
            configs = admin.describe_configs(topic)
            # Kafka's internal.segment.bytes (for tests) is listed where it is set only.
            assert admin.create_topic(topic + "-small", 1, 1, {"internal.segment.bytes": "1000"}) == NONE
            small = admin.describe_configs(topic + "-small")
        finally:
            admin.close()
        assert "internal.segment.bytes" not in configs, kind
        assert small["internal.segment.bytes"] == ConfigInfo("1000", DYNAMIC_TOPIC_CONFIG), kind
        assert configs["retention.ms"] == ConfigInfo("3600000", DYNAMIC_TOPIC_CONFIG), kind
        assert configs["cleanup.policy"] == ConfigInfo("compact", DYNAMIC_TOPIC_CONFIG), kind
        assert configs["segment.bytes"] == ConfigInfo("536870912", STATIC_BROKER_CONFIG), kind
        assert configs["max.message.bytes"] == ConfigInfo("1048588", DEFAULT_CONFIG), kind
        assert configs["retention.bytes"] == ConfigInfo("-1", DEFAULT_CONFIG), kind
        assert configs["message.timestamp.type"] == ConfigInfo("CreateTime", DEFAULT_CONFIG), kind


def _produce_raw(raw: RawConnection, topic: str, value: bytes) -> int:
    P = ProduceRequest[9]
    request = P(transactional_id=None, acks=1, timeout_ms=10_000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=record_batch([value]))])])
    return raw.request(request).responses[0].partition_responses[0].error_code


@pytest.mark.parametrize("kind", INCREMENTAL_ALTER_ADMINS)
def test_incremental_alter_configs(broker, unique_topic, kind):
    admin = open_admin(kind, broker)
    try:
        assert admin.create_topic(unique_topic, 1, 1, {"retention.ms": "3600000"}) == NONE
        assert admin.alter_configs(unique_topic, {"max.message.bytes": "1024"}) == NONE
        configs = admin.describe_configs(unique_topic)
        # Incremental: the earlier override stays, the new one is added.
        assert configs["retention.ms"] == ConfigInfo("3600000", DYNAMIC_TOPIC_CONFIG)
        assert configs["max.message.bytes"] == ConfigInfo("1024", DYNAMIC_TOPIC_CONFIG)
        # The new limit applies to the next produce.
        with RawConnection(broker.bootstrap_servers) as raw:
            assert _produce_raw(raw, unique_topic, b"x" * 4096) == MESSAGE_TOO_LARGE
            assert _produce_raw(raw, unique_topic, b"x" * 100) == NONE

        assert admin.alter_configs(unique_topic, {}, delete=("retention.ms",)) == NONE
        configs = admin.describe_configs(unique_topic)
        assert configs["retention.ms"] == ConfigInfo("604800000", DEFAULT_CONFIG)
        assert configs["max.message.bytes"] == ConfigInfo("1024", DYNAMIC_TOPIC_CONFIG)

        assert admin.alter_configs(unique_topic, {"retention.ms": "soon"}) == INVALID_CONFIG
        assert admin.alter_configs(unique_topic, {"no.such.config": "1"}) == INVALID_CONFIG
        assert admin.describe_configs(unique_topic)["retention.ms"] == ConfigInfo("604800000", DEFAULT_CONFIG)
        assert admin.alter_configs(unique_topic + "-missing", {"retention.ms": "1"}) == UNKNOWN_TOPIC_OR_PARTITION
    finally:
        admin.close()


def test_legacy_alter_configs_replaces_all_overrides_with_aiokafka(broker, unique_topic):
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AiokafkaAdmin(broker.bootstrap_servers)
    try:
        assert admin.create_topic(unique_topic, 1, 1, {"retention.ms": "3600000"}) == NONE
        (response,) = admin._run(admin.admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, unique_topic, {"max.message.bytes": "1024"})]))
        assert [r[0] for r in response.resources] == [NONE]
        configs = admin.describe_configs(unique_topic)
        # Legacy AlterConfigs: the request's set is the whole set of overrides.
        assert configs["max.message.bytes"] == ConfigInfo("1024", DYNAMIC_TOPIC_CONFIG)
        assert configs["retention.ms"] == ConfigInfo("604800000", DEFAULT_CONFIG)
        (response,) = admin._run(admin.admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, unique_topic, {"retention.ms": "soon"})]))
        assert [r[0] for r in response.resources] == [INVALID_CONFIG]
        assert admin.describe_configs(unique_topic)["max.message.bytes"] == ConfigInfo("1024", DYNAMIC_TOPIC_CONFIG)
    finally:
        admin.close()


def test_create_partitions(admin, broker, unique_topic):
    assert admin.create_topic(unique_topic, 2, 1) == NONE
    assert produce_values(broker, unique_topic, 1, [b"before"]) == [0]
    assert admin.create_partitions(unique_topic, 5) == NONE
    assert admin.describe_topic(unique_topic) == {p: PartitionInfo(NODE_ID, (NODE_ID,), (NODE_ID,)) for p in range(5)}
    assert produce_values(broker, unique_topic, 4, [b"p4-0", b"p4-1"]) == [0, 1]
    assert consume_from_beginning(broker, unique_topic, 4, 2) == [(0, b"p4-0"), (1, b"p4-1")]
    assert consume_from_beginning(broker, unique_topic, 1, 1) == [(0, b"before")]

    assert admin.create_partitions(unique_topic, 3) == INVALID_PARTITIONS
    assert admin.create_partitions(unique_topic, 5) == INVALID_PARTITIONS
    assert admin.create_partitions(unique_topic + "-missing", 2) == UNKNOWN_TOPIC_OR_PARTITION
    assert sorted(admin.describe_topic(unique_topic)) == [0, 1, 2, 3, 4]


def test_delete_records_moves_low_watermark(admin, broker, unique_topic):
    assert admin.create_topic(unique_topic, 2, 1) == NONE
    values = [b"v%d" % i for i in range(50)]
    assert produce_values(broker, unique_topic, 0, values) == list(range(50))
    assert produce_values(broker, unique_topic, 1, values) == list(range(50))

    assert admin.delete_records(unique_topic, {0: 20, 1: 50}) == {0: 20, 1: 50}
    assert beginning_and_end(broker, unique_topic, 2) == [(20, 50), (50, 50)]
    assert consume_from_beginning(broker, unique_topic, 0, 30) == [(i, b"v%d" % i) for i in range(20, 50)]
    # Deleting below the current start changes nothing; beyond the high watermark is out of range.
    assert admin.delete_records(unique_topic, {0: 10}) == {0: 20}
    assert admin.delete_records(unique_topic, {0: 51}) == OFFSET_OUT_OF_RANGE
    # The partition stays writable after the start offset reached its end.
    assert produce_values(broker, unique_topic, 1, [b"after"]) == [50]
    assert consume_from_beginning(broker, unique_topic, 1, 1) == [(50, b"after")]


def test_delete_records_and_special_timestamps_at_the_wire(broker, unique_topic):
    """DeleteRecords' offset -1 (the high watermark) and ListOffsets' special timestamps no admin adapter sends."""
    from kafka.protocol.admin.topics import DeleteRecordsRequest
    from kafka.protocol.consumer.offsets import ListOffsetsRequest, OffsetSpec

    earliest_pending_upload = -6  # KIP-1023; kafka-python's OffsetSpec stops at LATEST_TIERED

    with RawConnection(broker.bootstrap_servers) as conn:
        create_topic(conn, unique_topic, partitions=2)
        for i in range(3):
            assert produce(conn, unique_topic, 0, record_batch([b"v%d" % i])).error_code == NONE

        def list_offset(timestamp: int, partition: int = 0) -> tuple[int, int]:
            R = ListOffsetsRequest[11]
            resp = conn.request(R(replica_id=-1, isolation_level=0, timeout_ms=10_000, topics=[R.ListOffsetsTopic(
                name=unique_topic, partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])]))
            found = resp.topics[0].partitions[0]
            return found.error_code, found.offset

        def delete_records(offset: int, partition: int = 0) -> tuple[int, int]:
            D = DeleteRecordsRequest[2]
            resp = conn.request(D(timeout_ms=10_000, topics=[D.DeleteRecordsTopic(
                name=unique_topic, partitions=[D.DeleteRecordsTopic.DeleteRecordsPartition(
                    partition_index=partition, offset=offset)])]))
            result = resp.topics[0].partitions[0]
            return result.error_code, result.low_watermark

        assert list_offset(OffsetSpec.EARLIEST_LOCAL) == (NONE, 0)
        assert list_offset(OffsetSpec.LATEST_TIERED) == (NONE, -1)  # no tiered storage: no offset, no error
        assert list_offset(earliest_pending_upload) == (NONE, -1)
        assert list_offset(OffsetSpec.MAX_TIMESTAMP, partition=1) == (NONE, -1)  # an empty partition
        assert list_offset(-7) == (INVALID_REQUEST, -1)

        assert delete_records(4) == (OFFSET_OUT_OF_RANGE, -1)  # beyond the high watermark
        assert delete_records(-1) == (NONE, 3)
        assert list_offset(OffsetSpec.EARLIEST) == list_offset(OffsetSpec.EARLIEST_LOCAL) == (NONE, 3)
        assert list_offset(OffsetSpec.LATEST) == (NONE, 3)
        assert delete_records(0, partition=5) == (UNKNOWN_TOPIC_OR_PARTITION, -1)
