"""Two replicas of a partition lost in one change of /brokers/ids (their sessions expired together): as Kafka's
controller takes dead replicas out of an ISR one at a time, the ISR keeps only the last one in sync, the leader,
so a follower that comes back first is not taken for an in-sync replica."""
from __future__ import annotations

from dataclasses import replace

from minikafka.broker.controller.replication_control import NewTopic
from minikafka.broker.metadata.metadata_image import NO_LEADER
from minikafka.broker.zk.kafka_zk_client import KafkaZkClient
from minikafka.broker.zk.zookeeper_client import ZkClientConfig
from tests.zookeeper.elected_controller import elected_controller, live_brokers, register_broker

REREGISTRATION_EPOCH_STEP = 1000  # a new session's czxid is higher than any before it


async def test_leader_and_follower_lost_together_leave_the_leader_alone_in_the_isr(zk_connect) -> None:
    async with KafkaZkClient.open(ZkClientConfig(zk_connect)) as zk:
        for broker_id in (1, 2, 3):
            await register_broker(zk, broker_id)
        async with elected_controller(zk) as controller:
            await controller.create_topics([NewTopic("t", 1, 2, {}, {})])
            before = controller.image.topics["t"].partitions[0]
            leader = before.leader
            follower = next(r for r in before.replicas if r != leader)
            live = await live_brokers(zk)
            others = {b: v for b, v in live.items() if b not in before.replicas}

            await controller.sync_live_brokers(others)
            lost = controller.image.topics["t"].partitions[0]
            assert (lost.leader, lost.isr) == (NO_LEADER, [leader])

            back = replace(live[follower], broker_epoch=live[follower].broker_epoch + REREGISTRATION_EPOCH_STEP)
            await controller.sync_live_brokers({**others, follower: back})
            offline = controller.image.topics["t"].partitions[0]
            assert (offline.leader, offline.isr) == (NO_LEADER, [leader])  # no unclean election: it waits
