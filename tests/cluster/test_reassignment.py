"""Partition reassignment (AlterPartitionReassignments / ListPartitionReassignments, KIP-455) on real 4-broker
clusters, in both controller modes, through kafka-python's admin client as `kafka-reassign-partitions.sh` would.

- Under an idempotent acks=all producer, a partition moves from [1, 2, 3] to [2, 3, 4]: broker 4 catches up
  through the normal fetch path, joins the ISR, the leadership leaves broker 1, and broker 1 deletes its replica.
  Every acknowledged record is then stored once at its offset and the three new replicas are byte-identical.
- The same move throttled, as `kafka-reassign-partitions.sh --execute --throttle` sets it up: broker 4 has a
  backlog of large records to copy under a load far below the throttle, and copies at about the throttle; the
  throttle is then cleared as `--verify` clears it.
- A reassignment kept in progress (the new replica's fetching paused) is listed with its adding and removing
  replicas, Metadata lists all of its replicas, refused changes answer Kafka's errors, and a cancel goes back to
  the original replicas, the new one deleting what it had.
- The controller killed midway: the one that takes over resumes the move (in ZooKeeper mode from the topic
  znode's "adding_replicas"/"removing_replicas").
- A target broker killed midway leaves the partition on its original replicas with all its data; once it is back,
  the reassignment completes.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError as DeliveryError
from confluent_kafka import Producer
from kafka import TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, ConfigSourceType, KafkaAdminClient, NewTopic
from kafka.errors import KafkaError
from kafka.protocol.admin.configs import DescribeConfigsRequest
from kafka.protocol.admin.topics import AlterPartitionReassignmentsRequest
from kazoo.client import KazooClient

import minikafka
from minikafka.broker.zk.zk_data import ReplicaAssignment, decode_topic, topic_path
from minikafka.broker_handle import Broker
from minikafka.protocol.errors import ErrorCode
from minikafka.storage.segment import LOG_SUFFIX
from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.cluster.replication_checks import (
    Acknowledgements,
    SteadyProducer,
    assert_acknowledged_exactly_once,
    assert_replicas_identical,
    partition_dir,
)
from tests.helpers import produce_acked, wait_until
from tests.raw_client import RawConnection

TOPIC = "moving"
TP = TopicPartition(TOPIC, 0)
WAIT_S = 60.0
UNTHROTTLED_MOVE_AFTER = 20_000  # records acknowledged before the unthrottled move starts

# The throttled move. Kafka's replication quota measures its rate over replication.quota.window.num windows of
# replication.quota.window.size.seconds, counting at least all but one of them as elapsed: a fresh quota lets
# about ten windows' worth through before it holds back, so the backlog is made well over that to be worth
# measuring (unthrottled, broker 4 copies it in well under a second).
THROTTLE = 250_000  # bytes/s: --throttle
BACKLOG_RECORDS = 750
BACKLOG_RECORD_BYTES = 10_000  # 7.5 MB: some twenty seconds at the throttle
THROTTLED_LOAD_RECORDS_PER_S = 100  # a few KB/s: a replica under a load at or above the throttle never catches up
THROTTLED_MOVE_AFTER = 100  # records of that load acknowledged before the move starts
QUOTA_WINDOWS = 11  # replication.quota.window.num (of 1 s), Kafka's default
RATE_MARGIN = 1.5
FETCH_BYTES = 65_536  # replica.fetch.max.bytes in the throttled run: what one fetch may add past the bound
SLOWEST_SHARE = 4  # copying at less than the throttle / this fails the test (a busy machine stays far above it)
THROTTLED_MOVE_LIMIT_S = 1.2 * SLOWEST_SHARE * BACKLOG_RECORDS * BACKLOG_RECORD_BYTES / THROTTLE
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
THROTTLED_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
# what --verify deletes on every broker once the moves are done (the last one: --replica-alter-log-dirs-throttle)
BROKER_THROTTLES = (*THROTTLED_RATES, "replica.alter.log.dirs.io.max.bytes.per.second")
DYNAMIC_SOURCES = {ConfigSourceType.DYNAMIC_TOPIC_CONFIG.value, ConfigSourceType.DYNAMIC_BROKER_CONFIG.value}

THROTTLES = [pytest.param(None, id="unthrottled"), pytest.param(THROTTLE, id="throttled")]
Reassignments = dict[TopicPartition, dict[str, list[int]]]  # as kafka-python lists them


@pytest.fixture
def admin_of() -> Iterator[Any]:
    """Makes kafka-python admin clients for a cluster; every one made is closed at the end."""
    made: list[KafkaAdminClient] = []

    def make(cluster: minikafka.Cluster) -> KafkaAdminClient:
        client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=30000)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def create_on_first_three(admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic(TOPIC, replica_assignments={0: [1, 2, 3]},
                                  topic_configs={"min.insync.replicas": "2"})])


def reassign(admin: KafkaAdminClient, replicas: list[int] | None, tp: TopicPartition = TP) -> int:
    """The partition's error code (0 when accepted)."""
    results = admin.alter_partition_reassignments({tp: replicas})
    error = results[tp]
    return 0 if error is None else error.errno


def raw_reassign(admin: KafkaAdminClient, replicas: list[int], *, version: int,
                 allow_replication_factor_change: bool = True) -> Any:
    """AlterPartitionReassignments as sent, past the admin client's own checks: its response."""
    R = AlterPartitionReassignmentsRequest[version]
    fields = {"allow_replication_factor_change": allow_replication_factor_change} if version >= 1 else {}
    request = R(timeout_ms=30000, topics=[R.ReassignableTopic(name=TOPIC, partitions=[
        R.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=replicas)])], **fields)
    return admin._manager.run(admin._send_request_to_controller, request)


def ongoing(admin: KafkaAdminClient) -> Reassignments:
    return admin.list_partition_reassignments()


def ongoing_after_a_kill(cluster: minikafka.Cluster, admin_of: Any) -> Reassignments | None:
    """The ongoing reassignments, asked through a new admin client: one made earlier keeps sending to the broker
    the Metadata named controller then, which may be the one killed. None while no broker answers."""
    try:
        return ongoing(admin_of(cluster))
    except KafkaError:
        return None


def metadata_replicas(admin: KafkaAdminClient) -> list[int]:
    """The partition's replicas as a Metadata response lists them."""
    (topic,) = admin.describe_topics([TOPIC])
    (partition,) = topic["partitions"]
    return list(partition["replica_nodes"])


def replicas_are(cluster: minikafka.Cluster, replicas: list[int]) -> bool:
    partition = cluster.state.partition(TOPIC, 0)
    return partition.replicas == replicas and sorted(partition.isr) == sorted(replicas)


def wait_for_write_in_current_epoch(cluster: minikafka.Cluster, producer: SteadyProducer) -> None:
    """Wait until the producer is acknowledged for an offset the current leader assigned, so every leader epoch
    the log keeps wrote a batch (what the replica comparison assumes)."""
    start = cluster.state.partition(TOPIC, 0).log_end_offset
    assert start is not None
    wait_until(lambda: producer.highest_acknowledged() >= start, WAIT_S, interval=0.01,
               message=f"a write acknowledged at offset {start} or later")


def assert_no_replica_dir(cluster: minikafka.Cluster, broker_id: int) -> None:
    directory = partition_dir(cluster.broker(broker_id), TOPIC, 0)
    wait_until(lambda: not directory.exists(), WAIT_S, message=f"{directory} to be deleted")


def write_backlog(bootstrap_servers: str, acks: Acknowledgements) -> None:
    """BACKLOG_RECORDS large records, idempotent with acks=all, each acknowledgement noted in `acks`."""
    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": 60000})
    padding = b"b" * BACKLOG_RECORD_BYTES

    def delivered(err: DeliveryError | None, msg: Any) -> None:
        if err is None:
            acks.acknowledged(msg.partition(), msg.offset(), msg.value())
        else:
            acks.failed(f"{msg.value()[:20]!r}...: {err}")

    try:
        for number in range(BACKLOG_RECORDS):
            producer.produce(TOPIC, value=b"backlog-%06d-%s" % (number, padding), partition=0, on_delivery=delivered)
            producer.poll(0)
        assert producer.flush(WAIT_S) == 0, "backlog records unreported"
    finally:
        del producer  # librdkafka's threads and sockets go now


def alter(admin: KafkaAdminClient, resources: list[ConfigResource]) -> None:
    """IncrementalAlterConfigs, as kafka-reassign-partitions.sh sends it; every resource must be accepted."""
    results = admin.alter_configs(resources, incremental=True)
    refused = {name: result for by_name in results.values() for name, result in by_name.items() if result != "OK"}
    assert not refused, refused


def throttled_replicas(replicas: list[int]) -> str:
    """A throttled-replicas config naming these replicas of partition 0, in the tool's (sorted) order."""
    return ",".join(sorted(f"0:{replica}" for replica in replicas))


def set_reassignment_throttle(admin: KafkaAdminClient, cluster: minikafka.Cluster, rate: int,
                              current: list[int], target: list[int]) -> dict[str, str]:
    """What `kafka-reassign-partitions.sh --execute --throttle <rate>` sets before it submits a move: the topic's
    throttled replicas (the leader's: the current replicas, the follower's: those moving in), then both rates on
    every broker the move involves (here all of them). Returns every config it set."""
    topic_configs = {LEADER_THROTTLED_REPLICAS: throttled_replicas(current),
                     FOLLOWER_THROTTLED_REPLICAS: throttled_replicas([r for r in target if r not in current])}
    alter(admin, [ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs=dict(topic_configs))])
    broker_configs = dict.fromkeys(THROTTLED_RATES, str(rate))
    alter(admin, [ConfigResource(ConfigResourceType.BROKER, str(broker.node_id), configs=dict(broker_configs))
                  for broker in cluster.brokers])
    return {**topic_configs, **broker_configs}


def clear_reassignment_throttle(admin: KafkaAdminClient, cluster: minikafka.Cluster) -> None:
    """What `kafka-reassign-partitions.sh --verify` deletes once the moves are done."""
    deleted = (AlterConfigOp.DELETE, None)
    alter(admin, [ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs=dict.fromkeys(
        (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS), deleted))])
    alter(admin, [ConfigResource(ConfigResourceType.BROKER, str(broker.node_id),
                                 configs=dict.fromkeys(BROKER_THROTTLES, deleted)) for broker in cluster.brokers])


def throttles_seen_by(broker: Broker) -> dict[str, str]:
    """The throttle configs set on the topic and on the broker itself, as that broker describes them (from its own
    metadata: a change reaches each broker on its own, in ZooKeeper mode through a change notification)."""
    R = DescribeConfigsRequest[4]
    with RawConnection(broker.address) as connection:
        response = connection.request(R(resources=[
            R.DescribeConfigsResource(resource_type=ConfigResourceType.TOPIC.value, resource_name=TOPIC,
                                      configuration_keys=[LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS]),
            R.DescribeConfigsResource(resource_type=ConfigResourceType.BROKER.value, resource_name=str(broker.node_id),
                                      configuration_keys=list(BROKER_THROTTLES))],
            include_synonyms=False, include_documentation=False))
    seen: dict[str, str] = {}
    for result in response.results:
        assert result.error_code == 0, result
        seen.update({c.name: c.value for c in result.configs if c.config_source in DYNAMIC_SOURCES})
    return seen


def wait_for_throttles_seen(cluster: minikafka.Cluster, expected: dict[str, str]) -> None:
    for broker in cluster.brokers:
        def seen(broker: Broker = broker) -> bool:
            return throttles_seen_by(broker) == expected

        wait_until(seen, WAIT_S, message=f"broker {broker.node_id} to describe the throttle configs {expected}")


def log_bytes(broker: Broker) -> int:
    """The size of the broker's replica of the partition: the segments' record batches."""
    return sum(path.stat().st_size for path in partition_dir(broker, TOPIC, 0).glob(f"*{LOG_SUFFIX}"))


@pytest.mark.parametrize("throttle", THROTTLES)
@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_reassignment_from_1_2_3_to_2_3_4_under_acks_all_load(tmp_path, admin_of, zookeeper, throttle):
    """Throttled, broker 4 copies the backlog (and the load that comes meanwhile) no faster than the throttle
    allows, with Kafka's rate windows' burst and a fetch each way on top, and not much slower either."""
    config = {} if throttle is None else {"replica.fetch.max.bytes": FETCH_BYTES}
    with minikafka.Cluster(brokers=4, data_dir=tmp_path / "cluster", zookeeper=zookeeper, config=config) as cluster:
        admin = admin_of(cluster)
        create_on_first_three(admin)
        cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)
        assert cluster.state.partition(TOPIC, 0).leader == 1  # the leader is among the replicas removed
        acks = Acknowledgements()
        if throttle is not None:
            write_backlog(cluster.bootstrap_servers, acks)
        producer = SteadyProducer(cluster.bootstrap_servers, TOPIC, 1, acks, records_per_second=None
                                  if throttle is None else THROTTLED_LOAD_RECORDS_PER_S)
        producer.start()
        try:
            move_after = acks.count() + (UNTHROTTLED_MOVE_AFTER if throttle is None else THROTTLED_MOVE_AFTER)
            wait_until(lambda: acks.count() >= move_after, WAIT_S, message="records written before the move")
            if throttle is not None:
                # Each broker learns the configs on its own; the throttle is measured from the move on.
                wait_for_throttles_seen(cluster, set_reassignment_throttle(admin, cluster, throttle, [1, 2, 3],
                                                                           [2, 3, 4]))
            started = time.monotonic()
            assert reassign(admin, [2, 3, 4]) == 0
            wait_until(lambda: replicas_are(cluster, [2, 3, 4]) and not ongoing(admin),
                       WAIT_S if throttle is None else THROTTLED_MOVE_LIMIT_S, interval=0.1,
                       message="the reassignment to complete")
            elapsed = time.monotonic() - started
            copied = log_bytes(cluster.broker(4))
            assert cluster.state.partition(TOPIC, 0).leader in (2, 3, 4)
            wait_for_write_in_current_epoch(cluster, producer)
        finally:
            producer.finish()
        print(f"broker 4 copied {copied} bytes in {elapsed:.1f} s: {copied / elapsed:.0f} B/s, throttle {throttle}; "
              f"{producer.sent} records sent, {acks.count()} acknowledged")
        if throttle is not None:
            # At most the throttle over the move, plus the burst of the young rate windows and a fetch each way.
            allowed = RATE_MARGIN * throttle * (elapsed + QUOTA_WINDOWS) + 2 * FETCH_BYTES
            assert copied <= allowed, f"{copied} bytes copied in {elapsed:.1f} s: faster than the throttle allows"
            assert copied / elapsed >= throttle / SLOWEST_SHARE, f"{copied} bytes copied in {elapsed:.1f} s"
            clear_reassignment_throttle(admin, cluster)
            wait_for_throttles_seen(cluster, {})
        cluster.wait_for_replicas_caught_up(TOPIC, timeout=WAIT_S)
        records = cluster.state.records(TOPIC, 0, timeout_s=WAIT_S)
        assert_acknowledged_exactly_once(records, acks.of(0), f"{TOPIC}-0")
        assert_replicas_identical(cluster, TOPIC, 0)
        assert_no_replica_dir(cluster, 1)


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_reassignment_in_progress_is_listed_refused_changes_answer_errors_and_a_cancel_reverts(
        tmp_path, admin_of, zookeeper):
    with minikafka.Cluster(brokers=4, data_dir=tmp_path / "cluster", zookeeper=zookeeper) as cluster:
        admin = admin_of(cluster)
        create_on_first_three(admin)
        cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)
        produce_acked(cluster.bootstrap_servers, TOPIC, 100, partitions=1, acks="all")
        assert reassign(admin, None) == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
        assert reassign(admin, [2, 3, 9]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert reassign(admin, [2, 2, 3]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert raw_reassign(admin, [], version=0).responses[0].partitions[0].error_code == \
            ErrorCode.INVALID_REPLICA_ASSIGNMENT  # kafka-python's own check refuses an empty list before sending
        assert reassign(admin, [1, 2], TopicPartition("absent", 0)) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert reassign(admin, [1, 2], TopicPartition(TOPIC, 3)) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with cluster.broker(4).faults.pause_fetching():  # broker 4 cannot catch up: the move waits
            assert reassign(admin, [2, 3, 4]) == 0
            expected = {"replicas": [2, 3, 4, 1], "adding_replicas": [4], "removing_replicas": [1]}
            wait_until(lambda: ongoing(admin).get(TP) == expected, WAIT_S, message="the reassignment listed")
            assert admin.list_partition_reassignments([TP]) == {TP: expected}
            wait_until(lambda: metadata_replicas(admin) == [2, 3, 4, 1], WAIT_S,
                       message="Metadata to list every replica during the move")
            assert cluster.state.partition(TOPIC, 0).replicas == [2, 3, 4, 1]
            assert sorted(cluster.state.partition(TOPIC, 0).isr) == [1, 2, 3]
            wait_until(lambda: partition_dir(cluster.broker(4), TOPIC, 0).is_dir(), WAIT_S,
                       message="broker 4 to create its replica")
            assert reassign(admin, None) == 0
            assert ongoing(admin) == {}
            wait_until(lambda: replicas_are(cluster, [2, 3, 1]), WAIT_S, message="the original replicas back")
            assert_no_replica_dir(cluster, 4)
        produce_acked(cluster.bootstrap_servers, TOPIC, 100, partitions=1, start=100, acks="all")
        cluster.wait_for_replicas_caught_up(TOPIC, timeout=WAIT_S)
        values = [r.value for r in cluster.state.records(TOPIC, 0, timeout_s=WAIT_S)]
        assert values == [b"value-%06d" % i for i in range(200)]
        assert_replicas_identical(cluster, TOPIC, 0)


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_a_target_broker_dying_midway_loses_nothing_and_the_move_completes_when_it_returns(
        tmp_path, admin_of, zookeeper):
    with minikafka.Cluster(brokers=4, data_dir=tmp_path / "cluster", zookeeper=zookeeper) as cluster:
        admin = admin_of(cluster)
        create_on_first_three(admin)
        cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)
        acks = Acknowledgements()
        producer = SteadyProducer(cluster.bootstrap_servers, TOPIC, 1, acks)
        producer.start()
        try:
            wait_until(lambda: acks.count() >= 1000, WAIT_S, message="records written before the move")
            target = cluster.broker(4)
            target.faults.pause_fetching()  # held midway until the kill (which ends the fault)
            assert reassign(admin, [2, 3, 4]) == 0
            wait_until(lambda: partition_dir(target, TOPIC, 0).is_dir(), WAIT_S,
                       message="broker 4 to create its replica")
            target.kill()
            written = acks.count()
            wait_until(lambda: acks.count() >= written + 1000, WAIT_S,
                       message="writes acknowledged by the original replicas while broker 4 is down")
            wait_until(lambda: (ongoing_after_a_kill(cluster, admin_of) or {}).get(TP, {}).get("adding_replicas")
                       == [4], WAIT_S, interval=0.5, message="the reassignment listed while broker 4 is down")
            target.start()
            wait_until(lambda: replicas_are(cluster, [2, 3, 4]) and ongoing_after_a_kill(cluster, admin_of) == {},
                       WAIT_S, interval=0.5, message="the reassignment to complete once broker 4 is back")
            wait_for_write_in_current_epoch(cluster, producer)
        finally:
            producer.finish()
        cluster.wait_for_replicas_caught_up(TOPIC, timeout=WAIT_S)
        assert_acknowledged_exactly_once(cluster.state.records(TOPIC, 0, timeout_s=WAIT_S), acks.of(0), f"{TOPIC}-0")
        assert_replicas_identical(cluster, TOPIC, 0)
        assert_no_replica_dir(cluster, 1)


def topic_znode_assignment(cluster: minikafka.Cluster) -> ReplicaAssignment:
    """Partition 0 of the topic as /brokers/topics/<topic> holds it (ZooKeeper mode)."""
    client = KazooClient(hosts=cluster.zookeeper_connect)
    client.start(timeout=WAIT_S)
    try:
        data, _ = client.get(topic_path(TOPIC))
    finally:
        client.stop()
        client.close()
    return decode_topic(TOPIC, data).partitions[0]


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_an_ongoing_reassignment_survives_a_controller_failover(tmp_path, admin_of, zookeeper):
    """The controller is killed while a move waits for broker 4; the one that takes over (the restarted process,
    or in ZooKeeper mode whichever broker wins, reading the topic znode's adding and removing replicas) lists it
    and completes it once broker 4 catches up."""
    with minikafka.Cluster(brokers=4, data_dir=tmp_path / "cluster", zookeeper=zookeeper) as cluster:
        admin = admin_of(cluster)
        create_on_first_three(admin)
        cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)
        produce_acked(cluster.bootstrap_servers, TOPIC, 100, partitions=1, acks="all")
        if cluster.controller.node_id == 4:  # killed, the paused target would come back fetching and end the move
            cluster.broker(4).stop()
            cluster.wait_for_controller(timeout=WAIT_S, not_on=4)
            cluster.broker(4).start()
            cluster.wait_for_isr(TOPIC, 0, 3, timeout=WAIT_S)
            admin = admin_of(cluster)  # the first one keeps sending to the controller it was told of
        pause = cluster.broker(4).faults.pause_fetching()
        assert reassign(admin, [2, 3, 4]) == 0
        expected = {"replicas": [2, 3, 4, 1], "adding_replicas": [4], "removing_replicas": [1]}
        wait_until(lambda: ongoing(admin).get(TP) == expected, WAIT_S, message="the reassignment listed")
        if zookeeper:
            assert topic_znode_assignment(cluster) == ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
        controller = cluster.controller
        assert controller.node_id != 4
        controller.kill()
        if zookeeper:
            cluster.wait_for_controller(timeout=WAIT_S, not_on=controller.node_id)
        controller.start()
        wait_until(lambda: (ongoing_after_a_kill(cluster, admin_of) or {}).get(TP) == expected, WAIT_S, interval=0.5,
                   message="the new controller to list it")
        pause.clear()
        wait_until(lambda: replicas_are(cluster, [2, 3, 4]) and ongoing_after_a_kill(cluster, admin_of) == {},
                   WAIT_S, interval=0.5, message="the reassignment to complete")
        if zookeeper:
            wait_until(lambda: topic_znode_assignment(cluster) == ReplicaAssignment((2, 3, 4)), WAIT_S,
                       message="the topic znode to hold the new assignment")
        assert_no_replica_dir(cluster, 1)
        produce_acked(cluster.bootstrap_servers, TOPIC, 100, partitions=1, start=100, acks="all")
        cluster.wait_for_replicas_caught_up(TOPIC, timeout=WAIT_S)
        values = [r.value for r in cluster.state.records(TOPIC, 0, timeout_s=WAIT_S)]
        assert values == [b"value-%06d" % i for i in range(200)]
        assert_replicas_identical(cluster, TOPIC, 0)


def test_a_replication_factor_change_can_be_refused_in_v1(tmp_path, admin_of):
    """KIP-860: allow_replication_factor_change=false refuses a target of another size."""
    with minikafka.Cluster(brokers=4, data_dir=tmp_path / "cluster") as cluster:
        admin = admin_of(cluster)
        create_on_first_three(admin)
        response = raw_reassign(admin, [1, 2, 3, 4], version=1, allow_replication_factor_change=False)
        assert not response.allow_replication_factor_change
        (partition,) = response.responses[0].partitions
        assert partition.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
        assert cluster.state.partition(TOPIC, 0).replicas == [1, 2, 3]

