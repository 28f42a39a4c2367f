"""Kafka's ClusterControlManager: which brokers are registered, under which epoch, and the records that register,
unregister or re-register them, as the QuorumController asks before it commits them.

KRaft brokers register themselves (BrokerRegistration); in ZooKeeper mode the brokers ZooKeeper says are live
(/brokers/ids, their czxid the broker epoch) are brought in through `live_broker_records`.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from minikafka.broker.controller.broker_heartbeat_manager import BrokerHeartbeatManager
from minikafka.broker.metadata.metadata_image import BrokerEndpointInfo, BrokerInfo, MetadataImage
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.metadata_records import MetadataRecord, RegisterBrokerRecord, UnregisterBrokerRecord

log = logging.getLogger("minikafka.controller")


@dataclass(frozen=True)
class BrokerRegistration:
    """What a BrokerRegistration request asks for."""

    broker_id: int
    cluster_id: str
    incarnation_id: uuid.UUID
    endpoints: list[BrokerEndpointInfo]
    rack: str | None


@dataclass(frozen=True)
class LiveBroker:
    """A broker ZooKeeper says is alive: its registration and its broker epoch (the znode's czxid)."""

    broker_epoch: int
    endpoints: list[BrokerEndpointInfo]
    rack: str | None


@dataclass(frozen=True)
class HeartbeatReply:
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


def _register_record(broker_id: int, incarnation_id: uuid.UUID, broker_epoch: int,
                     endpoints: list[BrokerEndpointInfo], rack: str | None, fenced: bool,
                     in_controlled_shutdown: bool) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id, is_migrating_zk_broker=False, incarnation_id=incarnation_id, broker_epoch=broker_epoch,
        end_points=[RegisterBrokerRecord.BrokerEndpoint(name=e.name, host=e.host, port=e.port,
                                                        security_protocol=e.security_protocol) for e in endpoints],
        features=[], rack=rack, fenced=fenced, in_controlled_shutdown=in_controlled_shutdown)


class ClusterControlManager:
    def __init__(self, image: MetadataImage, cluster_id: str, heartbeats: BrokerHeartbeatManager) -> None:
        self.image = image
        self.cluster_id = cluster_id
        self.heartbeats = heartbeats

    def check_broker_epoch(self, broker_id: int, broker_epoch: int) -> BrokerInfo:
        """The broker's registration; STALE_BROKER_EPOCH unless it is registered under `broker_epoch`."""
        broker = self.image.brokers.get(broker_id)
        if broker is None:
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH, f"No broker registration found for broker id {broker_id}")
        if broker.broker_epoch != broker_epoch:
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH,
                             f"Expected broker epoch {broker.broker_epoch}, but got broker epoch {broker_epoch}")
        return broker

    def check_registration(self, registration: BrokerRegistration) -> BrokerInfo | None:
        """The broker's current registration when `registration` may replace it (None: it has none); raises
        INCONSISTENT_CLUSTER_ID or DUPLICATE_BROKER_REGISTRATION (a live session of another incarnation)."""
        if registration.cluster_id != self.cluster_id:
            raise KafkaError(ErrorCode.INCONSISTENT_CLUSTER_ID,
                             f"Expected cluster ID {self.cluster_id}, but got cluster ID {registration.cluster_id}")
        existing = self.image.brokers.get(registration.broker_id)
        if existing is not None and existing.incarnation_id != registration.incarnation_id \
                and self.heartbeats.has_valid_session(registration.broker_id):
            raise KafkaError(ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                             "Another broker is registered with that broker id.")
        return existing

    @staticmethod
    def register_broker_record(registration: BrokerRegistration, broker_epoch: int, fenced: bool,
                               in_controlled_shutdown: bool) -> RegisterBrokerRecord:
        return _register_record(registration.broker_id, registration.incarnation_id, broker_epoch,
                                registration.endpoints, registration.rack, fenced, in_controlled_shutdown)

    def live_broker_records(self, live: Mapping[int, LiveBroker]) -> tuple[list[MetadataRecord], list[int]]:
        """The records bringing the image's brokers to `live`: brokers gone unregistered, brokers new or back under
        a new epoch registered fenced; and the ids of the latter, to unfence once registered."""
        records: list[MetadataRecord] = []
        joining = []
        for broker_id, broker in sorted(self.image.brokers.items()):
            if broker_id not in live:
                log.info("broker %d is gone (its registration in ZooKeeper went away)", broker_id)
                records.append(UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=broker.broker_epoch))
        for broker_id, registration in sorted(live.items()):
            known = self.image.brokers.get(broker_id)
            if known is not None and known.broker_epoch == registration.broker_epoch:
                continue
            log.info("broker %d is live with broker epoch %d", broker_id, registration.broker_epoch)
            joining.append(broker_id)
            records.append(_register_record(broker_id, uuid.UUID(int=0), registration.broker_epoch,
                                            registration.endpoints, registration.rack, True, False))
        return records, joining
