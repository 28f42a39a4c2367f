"""What the ZooKeeper-mode cluster tests share: a raw controller request with a chosen controller epoch."""
from __future__ import annotations

import struct
import uuid
from typing import Any

from minikafka.protocol.control_plane import CONTROL_PLANE_SCHEMAS, LeaderAndIsrRequest
from tests.raw_client import RawConnection


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
