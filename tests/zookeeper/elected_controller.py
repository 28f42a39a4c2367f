"""What the tests of the controller's ZooKeeper store share: brokers registered and a controller elected in a
test's own session, over ZkMetadataStore, and a znode's JSON as a raw client reads it."""
from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from kazoo.client import KazooClient

from minikafka.broker.controller.cluster_control import LiveBroker
from minikafka.broker.controller.controller_config import QuorumControllerConfig
from minikafka.broker.controller.quorum_controller import QuorumController
from minikafka.broker.metadata.metadata_image import BrokerEndpointInfo, MetadataImage
from minikafka.broker.zk import zk_data
from minikafka.broker.zk.controller.zk_metadata_store import ZkMetadataStore
from minikafka.broker.zk.kafka_zk_client import KafkaZkClient
from minikafka.broker.zk.zk_data import BrokerRegistration, EndPoint


async def register_broker(zk: KafkaZkClient, broker_id: int) -> None:
    """A broker's /brokers/ids/<id>, owned by `zk`'s session."""
    registration = BrokerRegistration(broker_id, (EndPoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id, "PLAINTEXT"),))
    await zk.create_recursive(zk_data.broker_id_path(broker_id), zk_data.encode_broker_registration(registration, 0))


def znode_json(raw: KazooClient, path: str) -> dict:
    data, _ = raw.get(path)
    return json.loads(data)


async def live_brokers(zk: KafkaZkClient) -> dict[int, LiveBroker]:
    """/brokers/ids as the quorum controller takes it."""
    return {broker_id: LiveBroker(b.epoch, [BrokerEndpointInfo(e.listener_name, e.host, e.port, 0)
                                            for e in b.broker.endpoints], b.broker.rack)
            for broker_id, b in (await zk.get_all_broker_and_epochs_in_cluster()).items()}


@asynccontextmanager
async def elected_controller(zk: KafkaZkClient, node_id: int = 1) -> AsyncIterator[QuorumController]:
    """A controller elected now, its image read from ZooKeeper and its live brokers synced."""
    await zk.create_top_level_paths()
    epoch, version = await zk.register_controller_and_increment_controller_epoch(node_id)
    image = MetadataImage()
    store = ZkMetadataStore(zk, epoch, version, image)
    await store.read_state()
    controller = QuorumController(QuorumControllerConfig(node_id=node_id), store, "cluster", broker_sessions=False,
                                  image=image)
    await controller.sync_live_brokers(await live_brokers(zk))
    yield controller
