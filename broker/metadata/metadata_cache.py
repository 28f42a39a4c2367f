"""What the broker's handlers read of the cluster metadata (Kafka's KRaftMetadataCache): a view over the broker's
metadata image that answers by listener, as clients see the cluster.

A client is told of brokers on the listener its request came in on. A live broker is a registered one that is not
fenced; a replica is offline when its broker is fenced, unregistered, or has no endpoint on that listener. As in
KRaft, clients are given a random live broker as the controller, since they never talk to the controller itself
(KIP-590): requests meant for it are forwarded by whichever broker gets them. A ZooKeeper-mode broker names the
controller its latest UpdateMetadata named: the broker's metadata source says which.

What handlers compute from the image can be kept here until the image changes (`derived`): a Metadata response
encodes each topic once per change of the metadata, not once per request.
"""
from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from minikafka.broker.metadata.metadata_image import (
    NO_LEADER,
    BrokerEndpointInfo,
    BrokerInfo,
    MetadataImage,
    PartitionInfo,
    TopicInfo,
)

T = TypeVar("T")

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
NO_CONTROLLER = -1
# The purgatory key checked each time the broker applies a change of the metadata (a test's wait for a topic).
METADATA_CHANGE_KEY = ("metadata", "change")


def is_internal(topic: str) -> bool:
    return topic in INTERNAL_TOPICS


class MetadataCache:
    def __init__(self, image: MetadataImage, cluster_id: str, controller_id: Callable[[], int] | None = None) -> None:
        self.image = image
        self.cluster_id = cluster_id
        self._controller_id = controller_id if controller_id is not None else lambda: random_alive_broker_id(image)
        self._derived: dict[Hashable, Any] = {}
        self._derived_at = image.offset  # the image's last replayed record when `_derived` was computed

    def derived(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()`'s value, kept under `key` until the image changes (a record is replayed). `compute` must
        depend on nothing but the image and what `key` names."""
        if self._derived_at != self.image.offset:
            self._derived.clear()
            self._derived_at = self.image.offset
        try:
            value: T = self._derived[key]
        except KeyError:
            value = self._derived[key] = compute()
        return value

    @property
    def topics(self) -> dict[str, TopicInfo]:
        return self.image.topics

    @property
    def topics_by_id(self) -> dict[uuid.UUID, TopicInfo]:
        return self.image.topics_by_id

    def topic_configs(self, topic: str) -> dict[str, str]:
        """The topic's config overrides."""
        return dict(self.image.topic_configs.get(topic, {}))

    def group_configs(self, group: str) -> dict[str, str]:
        """The group's config overrides (resource type GROUP)."""
        return dict(self.image.group_configs.get(group, {}))

    def alive_brokers(self, listener: str) -> list[tuple[BrokerInfo, BrokerEndpointInfo]]:
        """Unfenced brokers with an endpoint on `listener`, by id."""
        found = []
        for broker in self.image.live_brokers():
            endpoint = broker.endpoint(listener)
            if endpoint is not None:
                found.append((broker, endpoint))
        return found

    def alive_endpoint(self, broker_id: int, listener: str) -> BrokerEndpointInfo | None:
        """The broker's endpoint on `listener` if it is registered and unfenced (Kafka's getAliveBrokerNode)."""
        broker = self.image.brokers.get(broker_id)
        if broker is None or broker.fenced:
            return None
        return broker.endpoint(listener)

    def leader_endpoint(self, broker_id: int, listener: str) -> BrokerEndpointInfo | None:
        """A partition leader's endpoint on `listener`: any registered broker's (a leader being fenced is moments
        from losing its leaderships; clients find out from the leader itself)."""
        if broker_id == NO_LEADER:
            return None
        broker = self.image.brokers.get(broker_id)
        return broker.endpoint(listener) if broker is not None else None

    def is_registered(self, broker_id: int) -> bool:
        return broker_id in self.image.brokers

    def offline_replicas(self, partition: PartitionInfo, listener: str) -> list[int]:
        offline = []
        for broker_id in partition.replicas:
            broker = self.image.brokers.get(broker_id)
            if broker is None or broker.fenced or broker.endpoint(listener) is None:
                offline.append(broker_id)
        return offline

    def alive_replicas(self, replicas: list[int], listener: str) -> list[int]:
        """`replicas` without those offline on `listener` (what Metadata v0 lists)."""
        return [r for r in replicas if self.alive_endpoint(r, listener) is not None]

    def controller_id(self) -> int:
        """The controller id clients are given."""
        return self._controller_id()


def random_alive_broker_id(image: MetadataImage) -> int:
    """KRaft's getRandomAliveBrokerId: the controller id a KRaft broker gives clients."""
    alive = image.live_brokers()
    return random.choice(alive).broker_id if alive else NO_CONTROLLER
