"""KafkaController's metrics by their Prometheus names (see the broker's metrics for the naming rules): a KRaft
controller's, a combined node's and a ZooKeeper-mode broker's, whose controller runs inside it."""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import Metric

from minikafka.broker.metadata.metadata_image import NO_LEADER, MetadataImage
from minikafka.broker.network.metrics_endpoint import gauge

if TYPE_CHECKING:
    from minikafka.broker.controller.quorum_controller import QuorumController


class ControllerNode(Protocol):
    """A KRaft controller's server, with its quorum controller once it runs."""

    controller: QuorumController


def active_image(server: ControllerNode) -> MetadataImage | None:
    """The controller's image: it is the active controller once it runs (the quorum has one voter)."""
    quorum: QuorumController | None = getattr(server, "controller", None)  # opened when the controller starts
    return quorum.image if quorum is not None else None


def controller_families(server: ControllerNode) -> list[Metric]:
    """A KRaft controller's metrics."""
    return kafka_controller_families(active_image(server))


def kafka_controller_families(active: MetadataImage | None) -> list[Metric]:
    """KafkaController's gauges; only the active controller (with the cluster's image) counts."""
    offline = 0
    if active is not None:
        offline = sum(1 for _topic, _index, p in active.partitions() if p.leader == NO_LEADER)
    return [gauge("kafka_controller_kafkacontroller_activecontrollercount", "1 on the active controller",
                  1 if active is not None else 0),
            gauge("kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions with no leader", offline)]
