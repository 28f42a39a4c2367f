"""A KRaft broker's metadata source: registration and heartbeats with the controller quorum
(BrokerLifecycleManager), the metadata log replayed into the image (MetadataLoader), and the channels to the
controller, over the network or, in a combined node, in process."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

import trio
from kafka.protocol.admin.cluster import DescribeClusterRequest

from minikafka.broker.metadata.broker_lifecycle_manager import BrokerLifecycleManager
from minikafka.broker.metadata.client_quota_entity import ClientQuotaEntity
from minikafka.broker.metadata.metadata_cache import random_alive_broker_id
from minikafka.broker.metadata.metadata_image import BrokerEndpointInfo, MetadataImage
from minikafka.broker.metadata.metadata_loader import LoaderCatchUp, MetadataLoader, Preparer, Publisher
from minikafka.broker.metadata.metadata_source import StartDeadline
from minikafka.broker.network.controller_channel import (
    ControllerChannel,
    ControllerHandler,
    LocalControllerChannel,
    NetworkControllerChannel,
)
from minikafka.broker.network.network_client import DisconnectedError, LinkIsCut, NetworkClientConfig
from minikafka.broker.security.client_security import controller_security
from minikafka.config import BrokerConfig, ConfigError
from minikafka.protocol.errors import ErrorCode

log = logging.getLogger("minikafka.broker")

DESCRIBE_CLUSTER_VERSION = 1
CONTROLLER_ENDPOINT_TYPE = 2  # DescribeCluster asks a controller about the controllers (KIP-919)


class KRaftMetadataSource:
    def __init__(self, config: BrokerConfig, local_controller: ControllerHandler | None,
                 link_is_cut: LinkIsCut) -> None:
        self.config = config
        self.node_id = config.node_id
        self._link_is_cut = link_is_cut
        self._network_channels: list[NetworkControllerChannel] = []
        self._controller_client_config: NetworkClientConfig | None = None
        # One channel per concern, as Kafka's broker has: a heartbeat never waits behind a metadata long poll or a
        # forwarded request.
        self._heartbeat_channel = self._channel(local_controller, "heartbeat",
                                                config.get("broker.heartbeat.interval.ms"))
        metadata_channel = self._channel(local_controller, "metadata", config.get("request.timeout.ms"))
        self.controller_channel = self._channel(local_controller, "to-controller", config.get("request.timeout.ms"))
        self.loader = MetadataLoader(self.node_id, metadata_channel, MetadataImage())
        self.image = self.loader.image
        self._catch_up = LoaderCatchUp(self.controller_channel, self.loader, config.get("request.timeout.ms"))
        self.lifecycle: BrokerLifecycleManager  # once registered

    def _channel(self, local_controller: ControllerHandler | None, purpose: str,
                 retry_timeout_ms: int) -> ControllerChannel:
        if local_controller is not None:
            return LocalControllerChannel(local_controller)
        addresses = self.config.controller_addresses
        if not addresses:
            raise ConfigError("a broker without a controller in its own process needs controller.quorum.voters or "
                              "controller.quorum.bootstrap.servers")
        if self._controller_client_config is None:  # one TLS context and login for every channel
            self._controller_client_config = NetworkClientConfig(
                connection_setup_timeout_ms=self.config.get("socket.connection.setup.timeout.ms"),
                reconnect_backoff_ms=self.config.get("reconnect.backoff.ms"),
                reconnect_backoff_max_ms=self.config.get("reconnect.backoff.max.ms"),
                request_timeout_ms=self.config.get("request.timeout.ms"),
                security=controller_security(self.config))
        channel = NetworkControllerChannel(addresses, f"broker-{self.node_id}-{purpose}",
                                           self._controller_client_config, retry_timeout_ms, self._link_is_cut)
        self._network_channels.append(channel)
        return channel

    @property
    def broker_epoch(self) -> int:
        return self.lifecycle.broker_epoch

    @property
    def is_ready(self) -> bool:
        return hasattr(self, "lifecycle") and self.lifecycle.unfenced.is_set()

    @property
    def knows_every_partition_at_start(self) -> bool:
        return True

    async def catch_up(self) -> bool:
        return await self._catch_up()

    def controller_id(self) -> int:
        """KRaft's getRandomAliveBrokerId: clients never talk to the controller itself (KIP-590)."""
        return random_alive_broker_id(self.image)

    async def start(self, nursery: trio.Nursery, deadline: StartDeadline) -> str:
        for channel in self._network_channels:
            await nursery.start(channel.run)
        where = ", ".join(f"{a.host}:{a.port}" for a in self.config.controller_addresses) if self._network_channels \
            else "in this process"
        return await deadline.until(self._cluster_id, f"reach the controller ({where})")

    async def _cluster_id(self) -> str:
        """cluster.id when configured, else the controller's (which every broker of the cluster must share)."""
        configured: str = self.config.get("cluster.id")
        if configured:
            return configured
        R = DescribeClusterRequest[DESCRIBE_CLUSTER_VERSION]
        request = R(include_cluster_authorized_operations=False, endpoint_type=CONTROLLER_ENDPOINT_TYPE)
        while True:
            try:
                response = await self.controller_channel.send(request, DESCRIBE_CLUSTER_VERSION)
            except DisconnectedError as exc:
                log.info("broker %d cannot reach the controller yet: %s", self.node_id, exc)
            else:
                if response.error_code == ErrorCode.NONE and response.cluster_id:
                    return str(response.cluster_id)
                log.info("broker %d: the controller answered DescribeCluster with %s", self.node_id,
                         ErrorCode(response.error_code).name)
            await trio.sleep(self.config.get("reconnect.backoff.max.ms") / 1000)

    async def register(self, nursery: trio.Nursery, cluster_id: str, endpoints: list[BrokerEndpointInfo],
                       deadline: StartDeadline, on_broker_epoch: Callable[[int], None]) -> None:
        self.lifecycle = BrokerLifecycleManager(
            self.node_id, cluster_id, self._heartbeat_channel, endpoints, self.config.get("broker.rack"),
            self.config.get("broker.heartbeat.interval.ms"), deadline.remaining_ms,
            lambda: self.loader.applied_offset, on_broker_epoch)
        await nursery.start(self.loader.run)
        started = time.monotonic()
        await nursery.start(self.lifecycle.run)
        registered = time.monotonic()
        await deadline.until(lambda: self.loader.wait_for(self.lifecycle.broker_epoch + 1),
                             "replay the cluster metadata up to its registration")
        log.debug("broker %d registered with the controller in %.0f ms, then replayed the metadata up to its "
                  "registration (offset %d) in %.0f ms", self.node_id, 1000 * (registered - started),
                  self.lifecycle.broker_epoch, 1000 * (time.monotonic() - registered))

    async def topic_configs(self) -> dict[str, dict[str, str]]:
        return self.image.topic_configs

    def install_publisher(self, publisher: Publisher, prepare: Preparer) -> None:
        self.loader.install_publisher(publisher, prepare)

    async def client_quotas_altered(self, entities: list[ClientQuotaEntity]) -> None:
        pass  # the metadata log brought them before the controller answered

    async def scram_credentials_altered(self, users: list[str]) -> None:
        pass  # the metadata log brought them before the controller answered

    async def features_altered(self) -> None:
        pass  # the metadata log brought them before the controller answered

    async def acls_altered(self) -> None:
        pass  # the metadata log brought them before the controller answered

    async def become_ready(self, nursery: trio.Nursery, deadline: StartDeadline) -> None:
        started = time.monotonic()
        self.lifecycle.set_ready_to_unfence()
        await deadline.until(self.lifecycle.unfenced.wait, "be unfenced by the controller")
        unfenced = time.monotonic()
        # The controller's answers to this broker's arrival (leaders elected onto it) are committed before it
        # unfences the broker: replayed here before the first client is served.
        await self._catch_up()
        log.debug("broker %d was unfenced in %.0f ms, then caught up with the controller's metadata in %.0f ms",
                  self.node_id, 1000 * (unfenced - started), 1000 * (time.monotonic() - unfenced))

    async def controlled_shutdown(self) -> None:
        if any(b.broker_id != self.node_id for b in self.image.live_brokers()):
            await self.lifecycle.controlled_shutdown(self.config.get("broker.session.timeout.ms") / 1000)
        else:  # the partitions would only go offline while requests in flight are still being answered
            log.info("broker %d skips its controlled shutdown: no other live broker could lead its partitions",
                     self.node_id)

    async def deregister(self) -> None:
        """A KRaft broker's registration ends with its controlled shutdown's last heartbeat."""
