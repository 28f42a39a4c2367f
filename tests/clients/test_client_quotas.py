"""Client quotas on real broker processes: AlterClientQuotas / DescribeClientQuotas on the wire (no Python admin
client sends them: kafka-python's schemas are used) in both controller modes, and throttling as clients see it —
a confluent-kafka producer held to producer_byte_rate and told so in throttle_time_ms (librdkafka's statistics
report the throttle time brokers send), a consumer held to consumer_byte_rate, and a quota that changes while a
producer runs.

The byte-rate bounds follow from Kafka's Rate: a quota is measured over `quota.window.num` (11) one-second
windows and never over less than 10 s, so from its first byte a client may take about 10 s worth of its quota at
once and then as much as the quota lets the measured span grow. Over the first 10 s a client far faster than the
quota thus gets about 10 s of quota; 20% either way covers the part of a window the span may hold besides, and
the requests a producer gets in past the bound while the span stays at its 10 s floor (each is throttled for as
long as its own excess takes, so small batches keep that small).
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest

import minikafka
from minikafka.protocol.errors import ErrorCode
from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.helpers import wait_until
from tests.raw_client import RawConnection
from tests.record_bytes import values_batch

WAIT_S = 30.0
ADMIN_TIMEOUT_S = 30.0
MEASURE_S = 10.0
TOLERANCE = 0.2
PRODUCER_QUOTA = 500_000  # bytes/s: a Python producer on loopback is many times faster
CONSUMER_QUOTA = 300_000
VALUE_BYTES = 1_000
ALTER_VERSION = 1
DESCRIBE_VERSION = 1
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
REQUESTS_UNTIL_THROTTLED = 500

Entity = list[tuple[str, str | None]]


def alter(conn: RawConnection, entries: list[tuple[Entity, list[tuple[str, float, bool]]]],
          validate_only: bool = False) -> list[tuple[int, str | None]]:
    R = AlterClientQuotasRequest[ALTER_VERSION]
    request = R(validate_only=validate_only, entries=[
        R.EntryData(entity=[R.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                    ops=[R.EntryData.OpData(key=k, value=v, remove=rm) for k, v, rm in ops])
        for entity, ops in entries])
    response = conn.request(request)
    return [(e.error_code, e.error_message) for e in response.entries]


def describe(conn: RawConnection, components: list[tuple[str, int, str | None]], strict: bool = False
             ) -> tuple[int, dict[tuple[tuple[str, str | None], ...], dict[str, float]]]:
    R = DescribeClientQuotasRequest[DESCRIBE_VERSION]
    response = conn.request(R(strict=strict, components=[
        R.ComponentData(entity_type=t, match_type=m, match=name) for t, m, name in components]))
    found = {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
             {v.key: v.value for v in entry.values} for entry in response.entries or []}
    return response.error_code, found


def set_quota(bootstrap: str, entity: Entity, key: str, value: float | None) -> None:
    with RawConnection(bootstrap.split(",")[0]) as conn:
        assert alter(conn, [(entity, [(key, value or 0.0, value is None)])]) == [(ErrorCode.NONE, None)]


def quotas_seen(bootstrap: str, entity: Entity) -> dict[str, float]:
    with RawConnection(bootstrap) as conn:
        code, found = describe(conn, [(t, MATCH_EXACT if n is not None else MATCH_DEFAULT, n) for t, n in entity],
                               strict=True)
    assert code == ErrorCode.NONE
    return found.get(tuple(sorted(entity)), {})


def wait_seen_everywhere(cluster: minikafka.Cluster, entity: Entity, expected: dict[str, float]) -> None:
    for broker in cluster.brokers:
        wait_until(lambda b=broker: quotas_seen(b.bootstrap_servers, entity) == expected, timeout=WAIT_S,
                   message=f"broker {broker.node_id} to describe {entity} as {expected}")


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_alter_and_describe_client_quotas_round_trip(tmp_path, zookeeper):
    with minikafka.Cluster(brokers=2, data_dir=tmp_path / "cluster", zookeeper=zookeeper) as cluster:
        with RawConnection(cluster.brokers[0].bootstrap_servers) as conn:
            default_user: Entity = [("user", None)]
            alice_app: Entity = [("user", "alice"), ("client-id", "app")]
            client: Entity = [("client-id", "c1")]
            alice: Entity = [("user", "alice")]
            alice_other: Entity = [("client-id", "other"), ("user", "alice")]
            # A user's clients and the user in one batch: in ZooKeeper, one multi-op creating their znodes.
            assert alter(conn, [
                (alice_other, [("producer_byte_rate", 7e5, False)]),
                (default_user, [("producer_byte_rate", 1e6, False)]),
                (alice_app, [("consumer_byte_rate", 2e6, False), ("request_percentage", 50.5, False)]),
                (client, [("producer_byte_rate", 3e6, False)]),
                (alice, [("request_percentage", 10.0, False)]),
            ]) == [(ErrorCode.NONE, None)] * 5
            # The broker the change went through describes it at once; the others, soon.
            assert quotas_seen(cluster.brokers[0].bootstrap_servers, alice_other) == {"producer_byte_rate": 7e5}
            if zookeeper:
                assert zk_configs(cluster.zookeeper_connect, [
                    "/config/users/alice/clients/other", "/config/users/<default>", "/config/clients/c1",
                    "/config/users/alice"]) == [{"producer_byte_rate": "700000"}, {"producer_byte_rate": "1000000"},
                                                {"producer_byte_rate": "3000000"}, {"request_percentage": "10.0"}]

            refused = alter(conn, [
                ([("user", "bob")], [("no_such_quota", 1.0, False)]),
                ([("user", "erin")], [("producer_byte_rate", -1.0, False)]),
                ([("client-id", "x")], [("producer_byte_rate", 1.5, False)]),
                ([("group", "g")], [("producer_byte_rate", 1.0, False)]),
                ([("ip", "127.0.0.1"), ("user", "u")], [("connection_creation_rate", 1.0, False)]),
                ([("ip", "127.0.0.1")], [("producer_byte_rate", 1.0, False)]),
                ([("user", "")], [("producer_byte_rate", 1.0, False)]),
                ([], [("producer_byte_rate", 1.0, False)]),
                ([("user", "carol")], [("producer_byte_rate", 1.0, False), ("producer_byte_rate", 2.0, False)]),
            ])
            assert [code for code, _ in refused] == [ErrorCode.INVALID_REQUEST] * len(refused)
            assert refused[0][1] == "Invalid configuration key no_such_quota"
            assert refused[1][1] == "Quota producer_byte_rate must be greater than 0"
            assert refused[2][1] == "producer_byte_rate cannot be a fractional value."
            assert alter(conn, [([("user", "dave")], [("producer_byte_rate", 5.0, False)])],
                         validate_only=True) == [(ErrorCode.NONE, None)]

            wait_seen_everywhere(cluster, alice_app, {"consumer_byte_rate": 2e6, "request_percentage": 50.5})
            wait_seen_everywhere(cluster, default_user, {"producer_byte_rate": 1e6})
            code, everything = describe(conn, [])
            assert code == ErrorCode.NONE
            assert set(everything) == {tuple(sorted(e)) for e in (default_user, alice_app, client, alice,
                                                                   alice_other)}
            # Not strict: every entity with a user named alice; strict: only entities of users alone.
            assert set(describe(conn, [("user", MATCH_EXACT, "alice")])[1]) == {
                tuple(sorted(e)) for e in (alice, alice_app, alice_other)}
            assert set(describe(conn, [("user", MATCH_SPECIFIED, None)], strict=True)[1]) == {
                tuple(default_user), tuple(alice)}
            assert describe(conn, [("user", MATCH_DEFAULT, "x")])[0] == ErrorCode.INVALID_REQUEST
            assert describe(conn, [("user", 7, None)])[0] == ErrorCode.INVALID_REQUEST
            assert describe(conn, [("ip", MATCH_SPECIFIED, None), ("user", MATCH_SPECIFIED, None)])[0] == \
                ErrorCode.INVALID_REQUEST
            assert describe(conn, [("group", MATCH_SPECIFIED, None)])[0] == ErrorCode.UNSUPPORTED_VERSION

            assert alter(conn, [(alice_app, [("request_percentage", 0.0, True)]),
                                (default_user, [("producer_byte_rate", 0.0, True)])]) == [(ErrorCode.NONE, None)] * 2
        wait_seen_everywhere(cluster, alice_app, {"consumer_byte_rate": 2e6})
        wait_seen_everywhere(cluster, default_user, {})
        wait_seen_everywhere(cluster, [("user", "dave")], {})

        # The controller's successor knows the quotas (KRaft: the controller restarted, replaying its log;
        # ZooKeeper: another broker, reading the znodes): removing one through it takes the quota away.
        old = cluster.controller
        if zookeeper:
            old.kill()
            cluster.wait_for_controller(not_on=old, timeout=WAIT_S)
        else:
            old.restart(kill=True)
        survivor = next(b for b in cluster.brokers if b is not old)
        with RawConnection(survivor.bootstrap_servers) as conn:
            wait_until(lambda: alter(conn, [(client, [("producer_byte_rate", 0.0, True)])]) == [(ErrorCode.NONE, None)],
                       timeout=WAIT_S, interval=0.5, message="the new controller to take the removal")
        wait_until(lambda: quotas_seen(survivor.bootstrap_servers, client) == {}, timeout=WAIT_S,
                   message="the removal to reach the broker")
        assert quotas_seen(survivor.bootstrap_servers, alice_app) == {"consumer_byte_rate": 2e6}
        if zookeeper:  # a broker starting reads the quotas from ZooKeeper
            old.start()
            wait_until(lambda: quotas_seen(old.bootstrap_servers, alice_other) == {"producer_byte_rate": 7e5},
                       timeout=WAIT_S, message="the restarted broker to have the quotas")
            assert quotas_seen(old.bootstrap_servers, client) == {}


def zk_configs(connect: str, paths: list[str]) -> list[dict[str, str]]:
    """The configs of these znodes, as Kafka's ZooKeeper mode reads them, and that a config change notification
    was written."""
    from kazoo.client import KazooClient  # ZooKeeper mode only

    zk = KazooClient(hosts=connect)
    zk.start(timeout=WAIT_S)
    try:
        assert zk.get_children("/config/changes")
        return [json.loads(zk.get(path)[0])["config"] for path in paths]
    finally:
        zk.stop()
        zk.close()


class ProducerStats:
    """What librdkafka's statistics say of the throttle time brokers send (the `throttle` window's max, in ms)."""

    def __init__(self) -> None:
        self.max_throttle_ms = 0
        self.last_throttle_ms = 0
        self.reports = 0
        self._lock = threading.Lock()

    def on_stats(self, payload: str) -> None:
        stats = json.loads(payload)
        throttle = max((b.get("throttle", {}).get("max", 0) for b in stats.get("brokers", {}).values()), default=0)
        with self._lock:
            self.reports += 1
            self.last_throttle_ms = throttle
            self.max_throttle_ms = max(self.max_throttle_ms, throttle)


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(ADMIN_TIMEOUT_S)


@contextmanager
def producing(bootstrap: str, topic: str, client_id: str, stats: ProducerStats) -> Iterator[dict[str, float]]:
    """A producer writing as fast as it can on a thread; yields the counts it keeps (acknowledged bytes, and the
    monotonic time of the first acknowledgement), and stops it when the block ends."""
    counts = {"acked_bytes": 0.0, "first_ack": 0.0}
    stop = threading.Event()
    failures: list[str] = []

    def delivered(err, msg) -> None:
        if err is not None:
            failures.append(str(err))
            return
        if not counts["first_ack"]:
            counts["first_ack"] = time.monotonic()
        counts["acked_bytes"] += len(msg.value())

    def run() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1, "linger.ms": 5,
                             "batch.size": 16_384, "statistics.interval.ms": 500, "stats_cb": stats.on_stats,
                             "queue.buffering.max.kbytes": 4096})
        value = b"v" * VALUE_BYTES
        try:
            while not stop.is_set():
                try:
                    producer.produce(topic, value, on_delivery=delivered)
                except BufferError:
                    producer.poll(0.05)
                producer.poll(0)
        finally:
            producer.flush(WAIT_S)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield counts
    finally:
        stop.set()
        thread.join(WAIT_S + 10)
    assert not thread.is_alive()
    assert failures == []


def test_a_producer_over_its_byte_rate_is_throttled_to_it_and_told_so(tmp_path):
    with minikafka.Cluster(brokers=1, data_dir=tmp_path / "cluster") as cluster:
        bootstrap = cluster.bootstrap_servers
        create_topic(bootstrap, "throttled")
        set_quota(bootstrap, [("client-id", "quota-producer")], "producer_byte_rate", PRODUCER_QUOTA)
        wait_seen_everywhere(cluster, [("client-id", "quota-producer")], {"producer_byte_rate": PRODUCER_QUOTA})
        stats = ProducerStats()
        with producing(bootstrap, "throttled", "quota-producer", stats) as counts:
            wait_until(lambda: counts["first_ack"], timeout=WAIT_S, message="the first acknowledgement")
            time.sleep(max(0.0, counts["first_ack"] + MEASURE_S - time.monotonic()))  # the measured span itself
            acked = counts["acked_bytes"]
        expected = PRODUCER_QUOTA * MEASURE_S
        assert (1 - TOLERANCE) * expected <= acked <= (1 + TOLERANCE) * expected, (acked, expected)
        assert stats.max_throttle_ms > 0


def test_a_quota_set_while_a_producer_runs_throttles_it_and_removing_it_stops_that(tmp_path):
    with minikafka.Cluster(brokers=1, data_dir=tmp_path / "cluster") as cluster:
        bootstrap = cluster.bootstrap_servers
        create_topic(bootstrap, "changing")
        stats = ProducerStats()
        with producing(bootstrap, "changing", "changing-producer", stats) as counts:
            wait_until(lambda: counts["first_ack"] and stats.reports >= 2, timeout=WAIT_S,
                       message="the producer to run and report")
            assert stats.max_throttle_ms == 0
            set_quota(bootstrap, [("client-id", "changing-producer")], "producer_byte_rate", 100_000)
            wait_until(lambda: stats.last_throttle_ms > 0, timeout=WAIT_S, message="the producer to be throttled")
            set_quota(bootstrap, [("client-id", "changing-producer")], "producer_byte_rate", None)
            wait_until(lambda: stats.last_throttle_ms == 0, timeout=WAIT_S,
                       message="the producer to be throttled no more")


def test_a_consumer_over_its_byte_rate_is_throttled(tmp_path):
    with minikafka.Cluster(brokers=1, data_dir=tmp_path / "cluster") as cluster:
        bootstrap = cluster.bootstrap_servers
        create_topic(bootstrap, "to-read")
        produced = 0
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        total = int(CONSUMER_QUOTA * MEASURE_S * 3)
        while produced < total:
            producer.produce("to-read", b"r" * VALUE_BYTES)
            producer.poll(0)
            produced += VALUE_BYTES
        assert producer.flush(WAIT_S) == 0
        set_quota(bootstrap, [("client-id", "quota-consumer")], "consumer_byte_rate", CONSUMER_QUOTA)
        wait_seen_everywhere(cluster, [("client-id", "quota-consumer")], {"consumer_byte_rate": CONSUMER_QUOTA})

        stats = ProducerStats()
        consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": "quota-consumer", "group.id": "quota-g",
                             "enable.auto.commit": False, "statistics.interval.ms": 500,
                             "stats_cb": stats.on_stats})
        try:
            consumer.assign([TopicPartition("to-read", 0, 0)])
            consumed = 0
            started = None
            deadline = time.monotonic() + WAIT_S + MEASURE_S
            while time.monotonic() < deadline:
                message = consumer.poll(0.2)
                if message is None or message.error() is not None:
                    continue
                if started is None:
                    started = time.monotonic()
                elif time.monotonic() - started >= MEASURE_S:
                    break
                consumed += len(message.value())
        finally:
            consumer.close()
        assert started is not None
        assert consumed <= (1 + TOLERANCE) * CONSUMER_QUOTA * MEASURE_S, consumed
        assert consumed < total
        assert stats.max_throttle_ms > 0


def produce_request(version: int, topic: str, records: bytes):
    R = ProduceRequest[version]
    return R(transactional_id=None, acks=1, timeout_ms=10_000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(index=0, records=records)])])


@pytest.mark.parametrize(("version", "client_backs_off"), [pytest.param(9, True, id="kip-219"),
                                                           pytest.param(5, False, id="older")])
def test_a_throttled_connection_is_muted_after_its_response_or_answered_late(tmp_path, version, client_backs_off):
    """15 KB against 1000 B/s measured over 10 s: 1500 B/s, a throttle of about 5 s. A KIP-219 client gets its
    answer at once and then nothing more for that long; an older one gets its answer that late."""
    with minikafka.Cluster(brokers=1, data_dir=tmp_path / "cluster") as cluster:
        bootstrap = cluster.bootstrap_servers
        create_topic(bootstrap, "muted")
        set_quota(bootstrap, [("client-id", "raw-test")], "producer_byte_rate", 1000)
        wait_seen_everywhere(cluster, [("client-id", "raw-test")], {"producer_byte_rate": 1000})
        with RawConnection(bootstrap) as conn:
            sent = time.monotonic()
            response = conn.request(produce_request(version, "muted", values_batch([b"m" * 15_000])))
            answered_s = time.monotonic() - sent
            assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
            throttle_s = response.throttle_time_ms / 1000
            assert 4.5 <= throttle_s <= 6.0, throttle_s
            conn.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
            next_answered_s = time.monotonic() - sent
        assert next_answered_s >= throttle_s
        if client_backs_off:
            assert answered_s < throttle_s
        else:
            assert answered_s >= throttle_s


def test_a_client_over_its_request_percentage_is_throttled_for_at_most_a_window(tmp_path):
    with minikafka.Cluster(brokers=1, data_dir=tmp_path / "cluster") as cluster:
        bootstrap = cluster.bootstrap_servers
        set_quota(bootstrap, [("client-id", "raw-test")], "request_percentage", 0.0001)
        wait_seen_everywhere(cluster, [("client-id", "raw-test")], {"request_percentage": 0.0001})
        throttles = []
        with RawConnection(bootstrap) as conn:
            for _ in range(REQUESTS_UNTIL_THROTTLED):
                response = conn.request(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                                            include_topic_authorized_operations=False))
                if response.throttle_time_ms:
                    throttles.append(response.throttle_time_ms)
                    break
        assert throttles and 0 < throttles[0] <= 1000
