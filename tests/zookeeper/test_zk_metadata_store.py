"""The quorum controller over `ZkMetadataStore` against a real ZooKeeper server: its operations write Kafka's
znodes (topics, partition states with the znode version as partition epoch, topic configs and their change
notifications, producer-id blocks, topic deletion, users' SCRAM credentials beside their quotas), a new controller
reads them back into the same image, and a controller whose epoch was superseded writes nothing and changes
nothing."""
from __future__ import annotations

import json

import pytest

from minikafka.broker.controller.client_quota_control import ClientQuotaAlteration, ClientQuotaOp
from minikafka.broker.controller.configuration_control import SET, ConfigAlteration
from minikafka.broker.controller.quorum_controller import (
    ConfigResourceAlteration,
    IsrChange,
    TopicIsrChanges,
)
from minikafka.broker.controller.replication_control import CreatedTopic, NewTopic
from minikafka.broker.controller.scram_control import ScramCredentialDeletion, ScramCredentialUpsertion
from minikafka.broker.metadata.metadata_image import TOPIC_RESOURCE
from minikafka.broker.metadata.scram_credentials import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    credential_from_salted_password,
    credential_from_string,
    credential_to_string,
)
from minikafka.broker.zk.kafka_zk_client import ControllerMovedError, KafkaZkClient
from minikafka.broker.zk.zookeeper_client import ZkClientConfig
from minikafka.protocol.errors import ErrorCode, KafkaError
from tests.zookeeper.elected_controller import elected_controller, register_broker, znode_json


async def test_operations_write_kafkas_znodes_and_a_new_controller_reads_them_back(zk_connect, raw) -> None:
    async with KafkaZkClient.open(ZkClientConfig(zk_connect)) as zk:
        for broker_id in (1, 2, 3):
            await register_broker(zk, broker_id)
        async with elected_controller(zk) as controller:
            assert sorted(controller.image.brokers) == [1, 2, 3]
            [created] = await controller.create_topics([NewTopic("orders", 2, 3, {}, {"retention.ms": "1000"})])
            assert isinstance(created, CreatedTopic)
            topic = znode_json(raw, "/brokers/topics/orders")
            assert topic["topic_id"] and sorted(topic["partitions"]) == ["0", "1"]
            assert all(sorted(r) == [1, 2, 3] for r in topic["partitions"].values())
            state0 = znode_json(raw, "/brokers/topics/orders/partitions/0/state")
            partition = controller.image.topics["orders"].partitions[0]
            assert (state0["leader"], state0["leader_epoch"], sorted(state0["isr"])) == (
                partition.leader, 0, [1, 2, 3])
            assert raw.get("/brokers/topics/orders/partitions/0/state")[1].version == partition.partition_epoch == 0
            assert znode_json(raw, "/config/topics/orders")["config"] == {"retention.ms": "1000"}

            # An ISR shrink by the leader: the state znode's version is the new partition epoch.
            follower = next(r for r in partition.replicas if r != partition.leader)
            [[result]] = await controller.alter_partition(partition.leader, controller.image.brokers[
                partition.leader].broker_epoch, [TopicIsrChanges("orders", None, [IsrChange(
                    0, 0, 0, [(r, -1) for r in partition.isr if r != follower])])])
            assert result.error is ErrorCode.NONE
            _, stat = raw.get("/brokers/topics/orders/partitions/0/state")
            assert stat.version == 1 == controller.image.topics["orders"].partitions[0].partition_epoch
            assert follower not in znode_json(raw, "/brokers/topics/orders/partitions/0/state")["isr"]
            # A stale partition epoch is refused.
            [[stale]] = await controller.alter_partition(partition.leader, controller.image.brokers[
                partition.leader].broker_epoch, [TopicIsrChanges("orders", None, [IsrChange(
                    0, 0, 0, [(r, -1) for r in partition.isr])])])
            assert stale.error is ErrorCode.INVALID_UPDATE_VERSION

            assert await controller.alter_configs([ConfigResourceAlteration(TOPIC_RESOURCE, "orders", [
                ConfigAlteration("retention.ms", SET, "2000")])], incremental=True) == [None]
            assert znode_json(raw, "/config/topics/orders")["config"] == {"retention.ms": "2000"}
            [change] = raw.get_children("/config/changes")
            assert change.startswith("config_change_")
            assert znode_json(raw, f"/config/changes/{change}") == {"version": 2, "entity_path": "topics/orders"}

            assert await controller.allocate_producer_ids(1, controller.image.brokers[1].broker_epoch) == (0, 1000)
            block = znode_json(raw, "/latest_producer_id_block")
            assert (block["broker"], block["block_start"], block["block_end"]) == (1, "0", "999")

            await controller.create_topics([NewTopic("gone", 1, 1, {}, {})])
            [deleted] = await controller.delete_topics([("gone", None)])
            assert deleted.error is None and "gone" not in controller.image.topics
            # Marked until its replicas are deleted: the znodes stay, and the name cannot be taken again yet.
            assert raw.exists("/admin/delete_topics/gone") is not None
            assert raw.exists("/brokers/topics/gone/partitions/0/state") is not None
            [again] = await controller.create_topics([NewTopic("gone", 1, 1, {}, {})])
            assert isinstance(again, KafkaError) and again.code is ErrorCode.TOPIC_ALREADY_EXISTS
            assert again.message == "Topic 'gone' is marked for deletion."
            await controller._store.complete_topic_deletion("gone")  # type: ignore[attr-defined]
            assert raw.exists("/brokers/topics/gone") is None and raw.exists("/config/topics/gone") is None
            assert raw.exists("/admin/delete_topics/gone") is None

        await zk.delete_controller(controller._store.epoch_zk_version)  # type: ignore[attr-defined]
        async with elected_controller(zk, node_id=2) as successor:
            image, before = successor.image, controller.image
            assert sorted(image.topics) == ["orders"]
            assert image.topics["orders"].topic_id == before.topics["orders"].topic_id
            assert image.topics["orders"].partitions == before.topics["orders"].partitions
            assert image.topic_configs == {"orders": {"retention.ms": "2000"}}
            assert image.next_producer_id == 1000
            assert image.controller_epoch == before.controller_epoch + 1


async def test_a_superseded_controller_writes_nothing_and_keeps_its_image(zk_connect, raw) -> None:
    async with KafkaZkClient.open(ZkClientConfig(zk_connect)) as zk:
        await register_broker(zk, 1)
        async with elected_controller(zk) as deposed:
            await zk.delete_controller(deposed._store.epoch_zk_version)  # type: ignore[attr-defined]
            async with elected_controller(zk, node_id=2):
                with pytest.raises(ControllerMovedError):
                    await deposed.create_topics([NewTopic("late", 1, 1, {}, {})])
                assert "late" not in deposed.image.topics and raw.exists("/brokers/topics/late") is None
                with pytest.raises(ControllerMovedError):  # and every later write too
                    await deposed.create_topics([NewTopic("later", 1, 1, {}, {})])


async def test_a_write_zookeeper_refuses_otherwise_leaves_the_controllers_state_in_doubt(zk_connect, raw) -> None:
    """A retried write that was applied the first time (its answer lost) meets its own work: NODEEXISTS. The
    store then deposes its controller with `state_unknown` (it moves the controller, and a successor reads
    ZooKeeper afresh) instead of failing the one request and carrying on with a wrong image."""
    async with KafkaZkClient.open(ZkClientConfig(zk_connect)) as zk:
        await register_broker(zk, 1)
        async with elected_controller(zk) as controller:
            await zk.create_topic("clash", None, {0: [1]})  # ZooKeeper has it; the controller's image does not
            with pytest.raises(ControllerMovedError):
                await controller.create_topics([NewTopic("clash", 1, 1, {}, {})])
            store = controller._store  # type: ignore[attr-defined]
            assert store.state_unknown and store.deposed
            with pytest.raises(ControllerMovedError):
                await controller.create_topics([NewTopic("other", 1, 1, {}, {})])
            await zk.delete_controller(store.epoch_zk_version)
        # The successor reads the topic as ZooKeeper has it and gives its partition a first state.
        async with elected_controller(zk, node_id=2) as successor:
            partition = successor.image.topics["clash"].partitions[0]
            assert (partition.leader, partition.isr, partition.leader_epoch) == (1, [1], 0)
            state = znode_json(raw, "/brokers/topics/clash/partitions/0/state")
            assert (state["leader"], state["isr"], state["leader_epoch"]) == (1, [1], 0)


async def test_a_partition_without_a_state_and_no_live_replica_waits(zk_connect, raw) -> None:
    async with KafkaZkClient.open(ZkClientConfig(zk_connect)) as zk:
        await register_broker(zk, 1)
        await zk.create_top_level_paths()
        await zk.create_topic("stranded", None, {0: [2], 1: [1]})
        async with elected_controller(zk) as controller:
            assert sorted(controller.image.topics["stranded"].partitions) == [1]
            assert raw.exists("/brokers/topics/stranded/partitions/0/state") is None


async def test_scram_credentials_share_the_users_config_znode_with_its_quotas(zk_connect, raw) -> None:
    """Kafka's ZooKeeper layout: a user's credentials are "SCRAM-SHA-256"/"SCRAM-SHA-512" entries of
    /config/users/<url-encoded user>, beside the user's quotas; neither kind of write erases the other, each is
    announced by a change notification naming the user, and a successor reads both back (a credential written there
    by Kafka's own tools as well)."""
    def user_config(path: str) -> dict[str, str]:
        return znode_json(raw, path)["config"]

    def notified() -> list[str]:
        return [znode_json(raw, f"/config/changes/{c}")["entity_path"] for c in sorted(raw.get_children(
            "/config/changes"))]

    async with KafkaZkClient.open(ZkClientConfig(zk_connect)) as zk:
        await register_broker(zk, 1)
        kafkas = ScramCredential(b"kafka-salt", b"k" * 32, b"v" * 32, 4096)
        raw.create("/config/users/carol%40example.com", json.dumps({"version": 1, "config": {
            "SCRAM-SHA-256": credential_to_string(kafkas), "consumer_byte_rate": "2048"}}).encode(), makepath=True)
        async with elected_controller(zk) as controller:
            assert controller.image.scram_credentials == {("carol@example.com", SCRAM_SHA_256): kafkas}
            alice: list[tuple[str, str | None]] = [("user", "alice")]
            assert await controller.alter_client_quotas([ClientQuotaAlteration(alice, [
                ClientQuotaOp("producer_byte_rate", 1024.0, False)])]) == [None]
            salt = b"alice-salt"
            results = await controller.alter_user_scram_credentials([], [
                ScramCredentialUpsertion("alice", SCRAM_SHA_256, 4096, salt, b"p" * 32),
                ScramCredentialUpsertion("bob", SCRAM_SHA_512, 8192, salt, b"q" * 64)])
            assert results == [("alice", None), ("bob", None)]
            sha_256 = credential_from_salted_password(SCRAM_SHA_256, salt, b"p" * 32, 4096)
            assert user_config("/config/users/alice") == {"producer_byte_rate": "1024",
                                                          "SCRAM-SHA-256": credential_to_string(sha_256)}
            assert credential_from_string(user_config("/config/users/bob")["SCRAM-SHA-512"]).iterations == 8192
            assert notified()[-2:] == ["users/alice", "users/bob"]

            # The quota goes, the credential stays; the credential goes, a new quota stays.
            assert await controller.alter_client_quotas([ClientQuotaAlteration(alice, [
                ClientQuotaOp("producer_byte_rate", 0.0, True)])]) == [None]
            assert user_config("/config/users/alice") == {"SCRAM-SHA-256": credential_to_string(sha_256)}
            assert await controller.alter_client_quotas([ClientQuotaAlteration(alice, [
                ClientQuotaOp("consumer_byte_rate", 4096.0, False)])]) == [None]
            assert await controller.alter_user_scram_credentials(
                [ScramCredentialDeletion("carol@example.com", SCRAM_SHA_256)], []) == [("carol@example.com", None)]
            assert user_config("/config/users/carol%40example.com") == {"consumer_byte_rate": "2048"}
            assert notified()[-1] == "users/carol%40example.com"
        await zk.delete_controller(controller._store.epoch_zk_version)  # type: ignore[attr-defined]
        async with elected_controller(zk, node_id=2) as successor:
            assert successor.image.scram_credentials == controller.image.scram_credentials == {
                ("alice", SCRAM_SHA_256): sha_256, ("bob", SCRAM_SHA_512): controller.image.scram_credentials[
                    ("bob", SCRAM_SHA_512)]}
            assert successor.image.client_quotas == {
                (("user", "alice"),): {"consumer_byte_rate": 4096.0},
                (("user", "carol@example.com"),): {"consumer_byte_rate": 2048.0}}
