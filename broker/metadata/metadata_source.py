"""Where a broker's cluster metadata comes from: the strategy that tells BrokerServer apart in its two modes.

A KRaft broker registers with the controller quorum, replays the metadata log and heartbeats
(KRaftMetadataSource); a ZooKeeper-mode broker registers in ZooKeeper, runs the controller election and is told the
metadata by whichever broker is controller (ZkMetadataSource). Either way the broker server sees one MetadataImage,
whose changes reach its publisher, and one channel to the controller.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import trio

from minikafka.broker.metadata.broker_lifecycle_manager import RegistrationError
from minikafka.broker.metadata.client_quota_entity import ClientQuotaEntity
from minikafka.broker.metadata.metadata_image import BrokerEndpointInfo, MetadataImage
from minikafka.broker.metadata.metadata_loader import Preparer, Publisher
from minikafka.broker.network.controller_channel import ControllerChannel

T = TypeVar("T")


class StartDeadline:
    """initial.broker.registration.timeout.ms as one deadline over every step of a broker's start."""

    def __init__(self, node_id: int, timeout_ms: int) -> None:
        self.node_id = node_id
        self.timeout_ms = timeout_ms
        self.at = trio.current_time() + timeout_ms / 1000

    @property
    def remaining_ms(self) -> int:
        return max(1, int(1000 * (self.at - trio.current_time())))

    async def until(self, step: Callable[[], Awaitable[T]], what: str) -> T:
        """`step()`'s result, or RegistrationError once the deadline has passed."""
        with trio.move_on_at(self.at):
            return await step()
        raise RegistrationError(f"broker {self.node_id} could not {what} within {self.timeout_ms} ms "
                                "(initial.broker.registration.timeout.ms)")


class MetadataSource(Protocol):
    """The steps of a broker's start and stop that depend on its mode, in the order BrokerServer calls them."""

    @property
    def image(self) -> MetadataImage: ...

    @property
    def controller_channel(self) -> ControllerChannel: ...

    @property
    def broker_epoch(self) -> int: ...

    @property
    def is_ready(self) -> bool: ...

    @property
    def knows_every_partition_at_start(self) -> bool:
        """Whether the image the logs are opened with names every partition of the cluster, so that a log with no
        replica here in it is a stray, put aside (KRaft: replayed up to the registration); in ZooKeeper mode the
        controller tells the broker afterwards, and has it delete what was deleted while it was away."""
        ...

    async def catch_up(self) -> bool:
        """Until this broker's metadata holds what the controller decided so far (bounded); False if it may not."""
        ...

    def controller_id(self) -> int:
        """The controller id clients are told."""
        ...

    async def start(self, nursery: trio.Nursery, deadline: StartDeadline) -> str:
        """Reach the cluster; returns its id."""
        ...

    async def register(self, nursery: trio.Nursery, cluster_id: str, endpoints: list[BrokerEndpointInfo],
                       deadline: StartDeadline, on_broker_epoch: Callable[[int], None]) -> None:
        """Register this broker and learn the metadata it opens its logs with."""
        ...

    async def topic_configs(self) -> dict[str, dict[str, str]]:
        """Every topic's config overrides, for opening the logs."""
        ...

    def install_publisher(self, publisher: Publisher, prepare: Preparer) -> None: ...

    async def client_quotas_altered(self, entities: list[ClientQuotaEntity]) -> None:
        """The controller accepted new quotas of these entities through this broker: a ZooKeeper-mode broker reads
        them back from ZooKeeper (as Kafka's did to describe them), so a client describing them through it sees
        its change at once; a KRaft broker has caught up with the controller by then."""
        ...

    async def scram_credentials_altered(self, users: list[str]) -> None:
        """The controller accepted new SCRAM credentials of these users through this broker: read back as
        `client_quotas_altered` reads quotas, so the image's `scram_credentials` hold them when the client is
        answered."""
        ...

    async def features_altered(self) -> None:
        """The controller finalized new feature levels through this broker: read back as `client_quotas_altered`
        reads quotas, so the image's `features` hold them when the client is answered."""
        ...

    async def acls_altered(self) -> None:
        """The controller accepted ACL changes through this broker: read back as `client_quotas_altered` reads
        quotas, so the next request through this broker is authorized by them."""
        ...

    async def become_ready(self, nursery: trio.Nursery, deadline: StartDeadline) -> None:
        """With the listeners serving: until the controller counts this broker in and its replicas are set."""
        ...

    async def controlled_shutdown(self) -> None:
        """Move this broker's leaderships away before it stops."""
        ...

    async def deregister(self) -> None:
        """Leave the cluster (after the controlled shutdown)."""
        ...
