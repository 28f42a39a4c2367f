"""A ZooKeeper-mode cluster end to end: a real ZooKeeper server and three real broker processes, any of which may be
controller (`minikafka.Cluster(brokers=3, zookeeper=True)`).

- the brokers elect one controller, and every broker's Metadata names it and all brokers; an RF=3 topic takes
  acks=all writes and serves them back;
- kill -9 of the controller broker while an idempotent producer writes with acks=all to partitions led by all
  three brokers: another broker is controller within zookeeper.session.timeout.ms plus a second, the dead broker's
  leaderships move, every acknowledged record is readable exactly once and the replicas end identical;
- SIGSTOP of the controller broker past its session, then SIGCONT: it was deposed, a request it sends with its old
  controller epoch is refused (STALE_CONTROLLER_EPOCH), and nothing the new controller wrote is overwritten;
- the controller broker killed while it creates a batch of topics: each topic ends fully created (every partition
  led, every broker knowing it) or not created at all; killed while it deletes them: each ends fully deleted or
  fully kept, and a deleted topic's logs are gone from every broker (the killed one once it is back);
- ZooKeeper killed and restarted while the brokers serve: acks=all writes are acknowledged throughout, the brokers
  reconnect, a controller governs again, nothing acknowledged is lost.
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest

import minikafka
from minikafka.cluster_handle import zookeeper_test_defaults
from minikafka.metadata_client import cluster_view
from minikafka.protocol.errors import ErrorCode
from tests.cluster.replication_checks import Acknowledgements, SteadyProducer, assert_every_acknowledged_record_kept
from tests.helpers import wait_until
from tests.raw_client import RawConnection
from tests.zookeeper.zk_cluster_support import send_controller_request, stale_leader_and_isr

SESSION_TIMEOUT_S = int(zookeeper_test_defaults()["zookeeper.session.timeout.ms"]) / 1000
# The bound for a controller failover: the dead controller's session expires, then an election.
FAILOVER_LIMIT_S = SESSION_TIMEOUT_S + 1.0
PARTITIONS = 3  # with three brokers and RF=3, the placement makes each broker the leader of one
WAIT_S = 30.0
POLL_S = 0.02
BATCH_TOPICS = 12  # created (then deleted) in one request while the controller is killed
BATCH_PARTITIONS = 4
# How long after the request the controller is killed, one round each: before it is forwarded, while the
# controller works on it, and most likely after it is done.
KILL_DELAYS_S = (0.0, 0.03, 0.3)

pytestmark = pytest.mark.usefixtures("zookeeper_installed")


@pytest.fixture
def cluster(tmp_path):
    with minikafka.Cluster(brokers=3, zookeeper=True, data_dir=tmp_path / "cluster") as running:
        yield running


def create_led_by_every_broker(cluster: minikafka.Cluster, topic: str) -> None:
    cluster.state.create_topic(topic, partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": 2})
    leaders = {cluster.wait_for_isr(topic, p, 3, timeout=WAIT_S).leader for p in range(PARTITIONS)}
    assert leaders == {1, 2, 3}, f"the partitions of {topic} are led by {sorted(leaders)}, not by every broker"


def test_brokers_agree_on_one_controller_and_serve_an_rf3_topic(cluster):
    controller = cluster.wait_for_controller(timeout=WAIT_S)
    for broker in cluster.brokers:
        view = cluster_view(broker.bootstrap_servers)
        assert (view.controller_id, view.broker_ids) == (controller.node_id, [1, 2, 3]), f"broker {broker.node_id}"
    zk = cluster.zookeeper_state
    assert zk.broker_ids() == [1, 2, 3] and zk.controller_epoch() >= 1
    assert cluster.zookeeper is not None and cluster.zookeeper.running
    assert cluster.nodes == cluster.brokers  # no controller process
    with pytest.raises(NotImplementedError, match="elect_preferred_leaders"):
        cluster.move_leader("t", 0, to=1)

    cluster.state.create_topic("rf3", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
    state = cluster.wait_for_isr("rf3", 0, 3, timeout=WAIT_S)
    stored = zk.partition_state("rf3", 0)
    assert stored is not None and (stored.leader, sorted(stored.isr)) == (state.leader, [1, 2, 3])
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", enable_idempotence=True,
                             request_timeout_ms=10000)
    try:
        offsets = [producer.send("rf3", b"v%d" % i, partition=0).get(timeout=20).offset for i in range(20)]
    finally:
        producer.close()
    assert offsets == list(range(20))
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=10000)
    try:
        consumer.assign([TopicPartition("rf3", 0)])
        values = [m.value for _, m in zip(range(20), consumer, strict=False)]
    finally:
        consumer.close()
    assert values == [b"v%d" % i for i in range(20)]
    cluster.wait_for_replicas_caught_up("rf3", timeout=WAIT_S)


def test_controller_killed_under_acks_all_load_another_broker_takes_over(cluster):
    topic = "failover"
    create_led_by_every_broker(cluster, topic)
    old = cluster.wait_for_controller(timeout=WAIT_S)
    old_epoch = cluster.zookeeper_state.controller_epoch()
    acks = Acknowledgements()
    producer = SteadyProducer(cluster.bootstrap_servers, topic, PARTITIONS, acks)
    producer.start()
    try:
        wait_until(lambda: acks.count() >= 100, WAIT_S, message="acknowledged records before the kill")
        led = [p for p in range(PARTITIONS) if cluster.state.partition(topic, p).leader == old.node_id]
        assert led, f"the controller, broker {old.node_id}, leads no partition of {topic}"
        killed_at = time.monotonic()
        old.kill()
        wait_until(lambda: cluster.zookeeper_state.controller_id() not in (None, old.node_id), WAIT_S,
                   interval=POLL_S, message="a new controller")
        election_s = time.monotonic() - killed_at
        new = cluster.wait_for_controller(not_on=old, timeout=WAIT_S)
        assert cluster.zookeeper_state.controller_epoch() > old_epoch
        for partition in led:
            cluster.wait_for_leader(topic, partition, not_on=old, timeout=WAIT_S)
        acknowledged = acks.count()
        wait_until(lambda: acks.count() >= acknowledged + 100, WAIT_S, message="writes acknowledged by new leaders")
        old.start()
        for partition in range(PARTITIONS):
            cluster.wait_for_isr(topic, partition, 3, timeout=WAIT_S)
    finally:
        producer.finish()
    print(f"controller {old.node_id} killed: broker {new.node_id} elected after {election_s:.3f} s "
          f"(session timeout {SESSION_TIMEOUT_S:g} s); {acks.count()} records acknowledged")
    assert election_s <= FAILOVER_LIMIT_S, f"a new controller after {election_s:.3f} s"
    assert_every_acknowledged_record_kept(cluster, topic, PARTITIONS, acks, WAIT_S)


def test_paused_controller_is_deposed_and_its_old_epoch_refused(cluster):
    topic = "deposed"
    create_led_by_every_broker(cluster, topic)
    old = cluster.wait_for_controller(timeout=WAIT_S)
    old_epoch = cluster.zookeeper_state.controller_epoch()
    topic_id = uuid.UUID(next(t["topic_id"] for t in cluster.state.describe([topic])[0]["topics"]))
    acks = Acknowledgements()
    producer = SteadyProducer(cluster.bootstrap_servers, topic, PARTITIONS, acks)
    producer.start()
    try:
        wait_until(lambda: acks.count() >= 100, WAIT_S, message="acknowledged records before the pause")
        old.pause()
        try:
            new = cluster.wait_for_controller(not_on=old, timeout=WAIT_S)
            new_epoch = cluster.zookeeper_state.controller_epoch()
            assert new_epoch > old_epoch
            for partition in range(PARTITIONS):
                cluster.wait_for_leader(topic, partition, not_on=old, timeout=WAIT_S)
            # What the new controller decided, before the old one runs again.
            decided = {p: cluster.zookeeper_state.partition_state(topic, p) for p in range(PARTITIONS)}
        finally:
            old.resume()
        # It finds it was deposed: it registers again and takes the new controller's word like any broker.
        wait_until(lambda: cluster.zookeeper_state.broker_ids() == [1, 2, 3], WAIT_S,
                   message="the resumed broker registered again")
        assert cluster.wait_for_controller(timeout=WAIT_S) == new
        for partition in range(PARTITIONS):
            cluster.wait_for_isr(topic, partition, 3, timeout=WAIT_S)

        # A controller request with the old epoch, as the deposed controller would send it, is refused.
        target = next(b for b in cluster.brokers if b is not old and b is not new)
        state = cluster.state.partition(topic, 0)
        request = stale_leader_and_isr(cluster.zookeeper_state.broker_epoch(target.node_id) or -1, old.node_id,
                                       old_epoch, topic, topic_id, 0, old.node_id, state.leader_epoch + 1,
                                       state.replicas)
        response = send_controller_request(target.bootstrap_servers, request)
        assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert cluster.state.partition(topic, 0).leader_epoch == state.leader_epoch  # nothing applied
    finally:
        producer.finish()
    # Nothing the new controller wrote was overwritten by the old one: every change since is the new controller's.
    for partition, before in decided.items():
        after = cluster.zookeeper_state.partition_state(topic, partition)
        assert before is not None and after is not None
        assert after.partition_epoch >= before.partition_epoch and after.leader_epoch >= before.leader_epoch
        assert after.controller_epoch >= new_epoch or after == before, f"{topic}-{partition}: {after}"
    assert cluster.zookeeper_state.controller_epoch() == new_epoch
    assert_every_acknowledged_record_kept(cluster, topic, PARTITIONS, acks, WAIT_S)


def test_zookeeper_killed_and_restarted_while_brokers_serve(cluster):
    topic = "through-zookeeper-restart"
    create_led_by_every_broker(cluster, topic)
    controller = cluster.wait_for_controller(timeout=WAIT_S)
    zookeeper = cluster.zookeeper
    assert zookeeper is not None
    acks = Acknowledgements()
    producer = SteadyProducer(cluster.bootstrap_servers, topic, PARTITIONS, acks)
    producer.start()
    try:
        wait_until(lambda: acks.count() >= 100, WAIT_S, message="acknowledged records before the kill")
        cluster.zookeeper_state.close()  # its session would only wait for the server
        zookeeper.kill()
        # Longer than a session: the data path does not wait on ZooKeeper, whatever it takes to come back.
        down_until = time.monotonic() + SESSION_TIMEOUT_S * 1.5
        while time.monotonic() < down_until:
            acknowledged = acks.count()
            wait_until(lambda seen=acknowledged: acks.count() > seen, WAIT_S, interval=POLL_S,
                       message="acks=all writes acknowledged while ZooKeeper is down")
        zookeeper.start()
        wait_until(lambda: cluster.zookeeper_state.broker_ids() == [1, 2, 3], WAIT_S,
                   message="every broker registered after ZooKeeper's restart")
        after = cluster.wait_for_controller(timeout=WAIT_S)
        acknowledged = acks.count()
        wait_until(lambda: acks.count() >= acknowledged + 100, WAIT_S, message="writes after ZooKeeper's restart")
        # The controller governs again: a leader killed now is replaced.
        victim = cluster.leader_of(topic, 0)
        victim.kill()
        cluster.wait_for_leader(topic, 0, not_on=victim, timeout=WAIT_S)
        victim.start()
        for partition in range(PARTITIONS):
            cluster.wait_for_isr(topic, partition, 3, timeout=WAIT_S)
    finally:
        producer.finish()
    print(f"ZooKeeper restarted: controller {controller.node_id} before, {after.node_id} after; "
          f"{acks.count()} records acknowledged")
    assert_every_acknowledged_record_kept(cluster, topic, PARTITIONS, acks, WAIT_S)


def kill_controller_after(cluster: minikafka.Cluster, request: object, delay_s: float) -> minikafka.Broker:
    """Send `request` to a broker that forwards it to the controller, kill -9 the controller `delay_s` later, wait
    for another controller, and restart the killed broker; returns it."""
    controller = cluster.wait_for_controller(timeout=WAIT_S)
    entry = next(b for b in cluster.brokers if b is not controller)
    with RawConnection(entry.bootstrap_servers, timeout=WAIT_S) as conn:
        conn.send(request)
        time.sleep(delay_s)  # a chosen moment of the controller's work, not a wait for state
        controller.kill()
    cluster.wait_for_controller(not_on=controller, timeout=WAIT_S)
    controller.start()
    cluster.wait_for_controller(timeout=WAIT_S)
    return controller


def topic_everywhere(cluster: minikafka.Cluster, topic: str) -> bool | None:
    """True when the topic is whole (ZooKeeper holds every partition's state, each partition led, every broker
    knows it), False when nothing of it is left anywhere, None in between."""
    zk = cluster.zookeeper_state
    stored = topic in zk.topics()
    pending_deletion = topic in zk.topics_being_deleted()
    known = [any(t["name"] == topic for t in d["topics"]) for d in cluster.state.describe([topic])]
    if not stored and not pending_deletion and not any(known):
        return False
    if not stored or pending_deletion or not all(known):
        return None
    if zk.partition_ids(topic) != list(range(BATCH_PARTITIONS)):
        return None
    if any(zk.partition_state(topic, p) is None for p in range(BATCH_PARTITIONS)):
        return None
    states = cluster.state.partitions(topic)
    whole = len(states) == BATCH_PARTITIONS and all(s.leader >= 0 and s.high_watermark is not None for s in states)
    return True if whole else None


def settled(cluster: minikafka.Cluster, topics: list[str]) -> dict[str, bool]:
    outcome: dict[str, bool | None] = {}

    def every_topic_settled() -> bool:
        outcome.clear()
        outcome.update({t: topic_everywhere(cluster, t) for t in topics})
        return all(v is not None for v in outcome.values())

    try:
        wait_until(every_topic_settled, WAIT_S, message="every topic whole or gone")
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; in between: {[t for t, v in outcome.items() if v is None]}") from None
    return {t: bool(v) for t, v in outcome.items()}


def create_batch(cluster: minikafka.Cluster, round_number: int, delay_s: float) -> list[str]:
    """One CreateTopics of BATCH_TOPICS topics with the controller killed `delay_s` into it; the topics created."""
    C = CreateTopicsRequest[5]
    names = [f"batch{round_number}-{i:02d}" for i in range(BATCH_TOPICS)]
    create = C(topics=[C.CreatableTopic(name=n, num_partitions=BATCH_PARTITIONS, replication_factor=3,
                                        assignments=[], configs=[]) for n in names],
               timeout_ms=int(WAIT_S * 1000), validate_only=False)
    killed = kill_controller_after(cluster, create, delay_s)
    created = [t for t, whole in settled(cluster, names).items() if whole]
    print(f"round {round_number}: controller {killed.node_id} killed {delay_s:g} s into the creation of "
          f"{BATCH_TOPICS} topics: {len(created)} created")
    return created


def test_controller_killed_during_topic_creation(cluster):
    for round_number, delay_s in enumerate(KILL_DELAYS_S):
        create_batch(cluster, round_number, delay_s)


def log_dirs_of(cluster: minikafka.Cluster, topic: str) -> list[str]:
    """The partition dirs of `topic` (current, future or being deleted) in every broker's log dir."""
    return sorted(f"broker {b.node_id}: {p.name}" for b in cluster.brokers for p in Path(b.data_dir).iterdir()
                  if p.is_dir() and p.name.startswith(f"{topic}-"))


def test_controller_killed_during_topic_deletion(cluster):
    for round_number, delay_s in enumerate(KILL_DELAYS_S):
        names = [f"gone{round_number}-{i:02d}" for i in range(BATCH_TOPICS)]
        for name in names:
            cluster.state.create_topic(name, partitions=BATCH_PARTITIONS, replication_factor=3)
        assert all(settled(cluster, names).values())
        D = DeleteTopicsRequest[4]
        killed = kill_controller_after(cluster, D(topic_names=names, timeout_ms=int(WAIT_S * 1000)), delay_s)
        outcome = settled(cluster, names)
        deleted = [t for t, whole in outcome.items() if not whole]
        print(f"round {round_number}: controller {killed.node_id} killed {delay_s:g} s into the deletion of "
              f"{BATCH_TOPICS} topics: {len(deleted)} deleted")
        # Deleted means deleted on every broker too, the killed one included once it is back.
        for topic in deleted:
            try:
                wait_until(lambda topic=topic: not log_dirs_of(cluster, topic), WAIT_S)
            except TimeoutError:
                raise AssertionError(f"deleted topic {topic} still has logs: {log_dirs_of(cluster, topic)}") from None
        for topic in set(names) - set(deleted):
            assert len(log_dirs_of(cluster, topic)) == 3 * BATCH_PARTITIONS
        # A name whose deletion is finished can be taken again.
        if deleted:
            cluster.state.create_topic(deleted[0], partitions=1, replication_factor=3)
            assert cluster.wait_for_isr(deleted[0], 0, 3, timeout=WAIT_S).leader >= 0
