"""What a request handler is given: the request's context, and through it the broker's services (the collaborators
handlers use), never the broker server itself, its socket server or its wiring.

BrokerServices is a Protocol: the broker server provides it (its parts are built as the broker starts, so they are
looked up when a request is answered), and a test may provide only what the handlers it calls use.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kafka.protocol.api_message import ApiMessage

from minikafka.broker.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    operations_bitfield,
)
from minikafka.broker.server.client_quota_manager import ANONYMOUS, handling_time_percent
from minikafka.protocol.codec import Records, RecordsSplicer

if TYPE_CHECKING:
    import trio

    from minikafka.broker.coordinator.group.group_coordinator import GroupCoordinator
    from minikafka.broker.coordinator.share.share_coordinator import ShareCoordinator
    from minikafka.broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
    from minikafka.broker.faults.disk_quota import DiskQuota
    from minikafka.broker.faults.injector import FaultInjector
    from minikafka.broker.log.log_cleaner import LogCleaner
    from minikafka.broker.log.log_manager import LogManager
    from minikafka.broker.metadata.metadata_cache import MetadataCache
    from minikafka.broker.metadata.metadata_image import BrokerEndpointInfo
    from minikafka.broker.metadata.metadata_source import MetadataSource
    from minikafka.broker.network.controller_channel import ControllerChannel
    from minikafka.broker.network.request_channel import Request
    from minikafka.broker.replication.broker_topic_stats import BrokerMetrics
    from minikafka.broker.replication.fetch_session import FetchSessionCache
    from minikafka.broker.replication.purgatory import Purgatory
    from minikafka.broker.replication.replica_manager import ReplicaManager
    from minikafka.broker.security.standard_authorizer import StandardAuthorizer
    from minikafka.broker.server.add_partitions_to_txn_manager import AddPartitionsToTxnManager
    from minikafka.broker.server.api_version_manager import ApiVersionManager
    from minikafka.broker.server.auto_topic_creation import AutoTopicCreationManager
    from minikafka.broker.server.client_quota_manager import QuotaManagers
    from minikafka.broker.server.dynamic_broker_config import DynamicBrokerConfig
    from minikafka.broker.server.forwarding import ForwardingManager
    from minikafka.broker.server.producer_id_manager import ProducerIdManager
    from minikafka.broker.server.request_recording import RequestRecorder
    from minikafka.broker.server.share.persister import Persister
    from minikafka.broker.server.share.share_partition_manager import SharePartitionManager
    from minikafka.config import BrokerConfig
    from minikafka.storage.log_config import LogConfig


class BrokerServices(Protocol):
    """The broker's collaborators request handlers use."""

    node_id: int
    config: BrokerConfig
    dynamic_config: DynamicBrokerConfig
    log_defaults: LogConfig
    endpoints: list[BrokerEndpointInfo]
    metadata: MetadataSource
    metadata_cache: MetadataCache
    controller_channel: ControllerChannel
    forwarding: ForwardingManager
    auto_topic_creation: AutoTopicCreationManager
    log_manager: LogManager
    log_cleaner: LogCleaner
    replica_manager: ReplicaManager
    purgatory: Purgatory
    fetch_sessions: FetchSessionCache
    group_coordinator: GroupCoordinator
    transaction_coordinator: TransactionCoordinator
    share_coordinator: ShareCoordinator
    share_partition_manager: SharePartitionManager
    add_partitions_to_txn: AddPartitionsToTxnManager
    producer_ids: ProducerIdManager
    client_quotas: QuotaManagers
    api_versions: ApiVersionManager
    faults: FaultInjector
    recorder: RequestRecorder
    authorizer: StandardAuthorizer | None  # None: no authorizer.class.name, everything is allowed
    disk_quota: DiskQuota
    metrics: BrokerMetrics

    @property
    def persister(self) -> Persister:
        """Where share-partition leaders keep their state: the share coordinator, over the network."""

    def stop(self) -> None:
        """A clean stop, as on SIGTERM (the control API's shutdown)."""

    async def close_connections(self, keep: int) -> int:
        """Close every client connection but connection `keep`; how many were closed."""

    def expire_sessions(self, user: str | None) -> int:
        """End the SASL sessions of `user` (None: all) now; how many ended."""


class RequestContext:
    """One request in flight: who sent it, which version, and how to build its response."""

    def __init__(self, services: BrokerServices, request: Request) -> None:
        assert request.schema is not None, "a raw request has no context"
        self.services = services
        self.header = request.header
        self.version = request.header.api_version
        self.schema = request.schema
        self.conn = request.context
        self.response_class = self.schema.response[self.version]
        self.splicer: RecordsSplicer | None = None
        self.request_size = request.size  # the request frame's bytes (what producer_byte_rate counts)
        self.throttle_time_ms = 0  # a byte-rate quota's throttle, as the handler found it (Produce, Fetch)
        self._request = request
        self._request_time_recorded = False
        self._request_quota = False  # whether a request_percentage applies: then the handler time is counted

    @property
    def principal(self) -> str:
        """Kafka's principal of the connection, "User:alice" (ANONYMOUS unless it authenticated)."""
        return self.conn.principal

    @property
    def user(self) -> str:
        """The principal's name, as client quotas name users."""
        return self.conn.principal.partition(":")[2] or ANONYMOUS

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str, *,
                  log_if_denied: bool = True) -> bool:
        """Whether the principal may do `operation` on the resource (always, without an authorizer)."""
        authorizer = self.services.authorizer
        return authorizer is None or authorizer.authorize(
            self.principal, self.conn.host, operation, resource_type, name,
            request=self.schema.request.__name__.removesuffix("Request"), log_if_denied=log_if_denied)

    def authorize_cluster(self, operation: AclOperation, *, log_if_denied: bool = True) -> bool:
        return self.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied)

    def authorize_by_resource_type(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether the principal may do `operation` on some resource of the type (Kafka's
        authorizeByResourceType)."""
        authorizer = self.services.authorizer
        return authorizer is None or authorizer.authorize_by_resource_type(self.principal, self.conn.host,
                                                                           operation, resource_type)

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """The authorized_operations bitfield of a resource: every operation of its type without an authorizer."""
        authorizer = self.services.authorizer
        if authorizer is None:
            return operations_bitfield(SUPPORTED_OPERATIONS[resource_type])
        return operations_bitfield(authorizer.authorized_operations(self.principal, self.conn.host, resource_type,
                                                                    name))

    def is_super_user(self) -> bool:
        """A principal of `super.users` (anyone, without an authorizer): the private control API is theirs."""
        authorizer = self.services.authorizer
        return authorizer is None or self.principal in authorizer.super_users

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def client(self) -> trio.SocketStream | None:
        """The connection's socket: a request waiting in a purgatory is dropped once the client closes it."""
        return self._request.client

    def draining(self) -> bool:
        """Whether the broker has begun to drain for shutdown: a waiting request answers early."""
        return self._request.draining()

    def start_handling(self) -> None:
        """Count the handler's time, when a request_percentage quota applies to the client."""
        quotas = self.services.client_quotas
        if quotas.request.quota(self.user, self.client_id) is not None:
            self._request_quota = True
            quotas.handler_time.start()

    def request_throttle_time_ms(self, *, exempt: bool = False) -> int:
        """request_percentage: this request's handling time so far (CPU time of its own task's steps), recorded
        once; the throttle that calls for. Exempt requests (a follower's fetch, acks=0 produce) record nothing."""
        if self._request_time_recorded or not self._request_quota:
            return 0
        self._request_time_recorded = True
        quotas = self.services.client_quotas
        seconds = quotas.handler_time.stop()
        if exempt:
            return 0
        return quotas.request.record_and_get_throttle_time_ms(self.user, self.client_id,
                                                              handling_time_percent(seconds))

    def response(self, **fields: object) -> ApiMessage:
        return self.response_class(**fields)

    def records(self, data: Records) -> bytes:
        """Record bytes for a response field, spliced in at encoding time rather than copied through it (and cut
        short first where a partial-fetch fault says so)."""
        faults = self.conn.response_faults
        if faults is not None and faults.cut_records is not None:
            data = faults.cut_records(data)
        if self.splicer is None:
            self.splicer = RecordsSplicer()
        return self.splicer.stand_in(data)
