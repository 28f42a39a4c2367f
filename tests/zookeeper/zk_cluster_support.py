"""What the ZooKeeper-mode cluster tests share: a steady idempotent acks=all producer over several partitions, the
cluster's agreement on its controller, and a raw controller request with a chosen controller epoch."""
from __future__ import annotations

import struct
import threading
import uuid
from typing import Any

from confluent_kafka import KafkaError, Producer

from minikafka.cluster_handle import Cluster
from minikafka.protocol.control_plane import CONTROL_PLANE_SCHEMAS, LeaderAndIsrRequest
from tests.cluster.replication_checks import (
    Acknowledgements,
    assert_acknowledged_exactly_once,
    assert_replicas_identical,
)
from tests.raw_client import RawConnection

MAX_RECORDS = 200_000  # bounds the producer loop; a run writes a fraction of it
MAX_IN_FLIGHT = 300  # records handed to the producer and not yet reported
FLUSH_S = 60.0


class SteadyProducer(threading.Thread):
    """confluent-kafka with enable.idempotence (acks=all) writing unique values round-robin to the partitions of
    a topic until stopped; every delivery report lands in `acks`."""

    def __init__(self, bootstrap_servers: str, topic: str, partitions: int, acks: Acknowledgements) -> None:
        super().__init__(name=f"steady-producer-{topic}", daemon=True)
        self.topic = topic
        self.partitions = partitions
        self.acks = acks
        self.client_errors: list[KafkaError] = []
        self.sent = 0
        self.unflushed = -1
        self.failure: BaseException | None = None
        self._stop_requested = threading.Event()
        self._producer = Producer({
            "bootstrap.servers": bootstrap_servers, "enable.idempotence": True, "acks": "all", "linger.ms": 2,
            "message.timeout.ms": 60000, "retry.backoff.ms": 20, "retry.backoff.max.ms": 200,
            "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200, "error_cb": self.client_errors.append,
        })

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            self.acks.acknowledged(msg.partition(), msg.offset(), msg.value())
        else:
            self.acks.failed(f"{msg.value()!r}: {err}")

    def run(self) -> None:
        try:
            while not self._stop_requested.is_set() and self.sent < MAX_RECORDS:
                if len(self._producer) >= MAX_IN_FLIGHT:
                    self._producer.poll(0.05)
                    continue
                self._producer.produce(self.topic, value=b"%s-%08d" % (self.topic.encode(), self.sent),
                                       partition=self.sent % self.partitions, on_delivery=self._delivered)
                self.sent += 1
                self._producer.poll(0.001)
            self.unflushed = self._producer.flush(FLUSH_S)
        except BaseException as exc:  # noqa: BLE001 - reported by finish()
            self.failure = exc

    def finish(self) -> None:
        """Stop writing, wait for every report; raise what the thread raised, assert nothing is left unreported."""
        self._stop_requested.set()
        self.join(FLUSH_S + 10)
        assert not self.is_alive(), "the producer did not finish flushing"
        if self.failure is not None:
            raise self.failure
        assert self.unflushed == 0, f"{self.unflushed} records unreported after {FLUSH_S} s"
        assert not self.acks.errors, f"delivery errors: {self.acks.errors[:5]}"


def assert_every_acknowledged_record_kept(cluster: Cluster, topic: str, partitions: int, acks: Acknowledgements,
                                          wait_s: float) -> None:
    """Exactly once at its acknowledged offset, on replicas that hold identical batches."""
    cluster.wait_for_replicas_caught_up(topic, timeout=wait_s)
    for partition in range(partitions):
        assert_acknowledged_exactly_once(cluster.state.records(topic, partition), acks.of(partition),
                                         f"{topic}-{partition}")
        assert_replicas_identical(cluster, topic, partition)


def stale_leader_and_isr(broker_epoch: int, controller_id: int, controller_epoch: int, topic: str,
                         topic_id: uuid.UUID, partition: int, leader: int, leader_epoch: int,
                         replicas: list[int]) -> Any:
    """A LeaderAndIsr (v6) for one partition, as a controller of `controller_epoch` would send it."""
    R: Any = LeaderAndIsrRequest[6]
    state = R.LeaderAndIsrPartitionState(partition_index=partition, controller_epoch=controller_epoch, leader=leader,
                                         leader_epoch=leader_epoch, isr=replicas, partition_epoch=leader_epoch,
                                         replicas=replicas, adding_replicas=[], removing_replicas=[], is_new=False,
                                         leader_recovery_state=0)
    return R(controller_id=controller_id, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
             request_type=0, topic_states=[R.LeaderAndIsrTopicState(topic_name=topic, topic_id=topic_id,
                                                                    partition_states=[state])],
             live_leaders=[])


def send_controller_request(address: str, request: Any) -> Any:
    """One controller-to-broker request over the broker's listener, its response decoded."""
    version = request.API_VERSION
    schema = CONTROL_PLANE_SCHEMAS[request.API_KEY]
    with RawConnection(address) as conn:
        correlation = conn.send(request)
        frame = conn.read_frame()
    assert frame is not None, f"{address} closed the connection instead of answering"
    (got,) = struct.unpack_from(">i", frame)
    assert got == correlation
    return schema.response.decode(frame[4 + schema.response_header_version(version):], version=version)
