"""Dynamic broker configs in ZooKeeper mode: the controller writes /config/brokers/<id> and /config/brokers/<default>
with a change notification naming each, as Kafka's admin did, and a new controller reads them back."""
from __future__ import annotations

from minikafka.broker.controller.configuration_control import DELETE, SET, ConfigAlteration
from minikafka.broker.controller.quorum_controller import ConfigResourceAlteration, QuorumController
from minikafka.broker.metadata.metadata_image import BROKER_RESOURCE
from minikafka.broker.zk.kafka_zk_client import KafkaZkClient
from minikafka.broker.zk.zk_broker_configs import read_broker_configs
from minikafka.broker.zk.zookeeper_client import ZkClientConfig
from tests.zookeeper.elected_controller import elected_controller, znode_json


async def _alter(controller: QuorumController, name: str, *alterations: ConfigAlteration) -> None:
    (error,) = await controller.alter_configs([ConfigResourceAlteration(BROKER_RESOURCE, name, list(alterations))],
                                              incremental=True)
    assert error is None


async def test_broker_configs_are_kafkas_znodes_and_read_back(zk_connect, raw) -> None:
    async with KafkaZkClient.open(ZkClientConfig(zk_connect)) as zk:
        async with elected_controller(zk) as controller:
            await _alter(controller, "2", ConfigAlteration("follower.replication.throttled.rate", SET, "1000"))
            await _alter(controller, "", ConfigAlteration("log.retention.ms", SET, "60000"),
                         ConfigAlteration("leader.replication.throttled.rate", SET, "5"))
            assert znode_json(raw, "/config/brokers/2")["config"] == {"follower.replication.throttled.rate": "1000"}
            assert znode_json(raw, "/config/brokers/<default>")["config"] == {"log.retention.ms": "60000",
                                                                              "leader.replication.throttled.rate": "5"}
            notifications = [znode_json(raw, f"/config/changes/{c}")
                             for c in sorted(raw.get_children("/config/changes"))]
            assert [n["entity_path"] for n in notifications] == ["brokers/2", "brokers/<default>"]
            await _alter(controller, "", ConfigAlteration("leader.replication.throttled.rate", DELETE, None))
            assert znode_json(raw, "/config/brokers/<default>")["config"] == {"log.retention.ms": "60000"}
        expected = {"2": {"follower.replication.throttled.rate": "1000"}, "": {"log.retention.ms": "60000"}}
        assert await read_broker_configs(zk) == expected
        await zk.delete_controller(controller._store.epoch_zk_version)  # type: ignore[attr-defined]
        async with elected_controller(zk, node_id=2) as successor:
            assert successor.image.broker_configs == expected
