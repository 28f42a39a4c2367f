"""Who may join an ISR when the leader knows live brokers but not their epochs: ZooKeeper mode, whose
UpdateMetadata names the live brokers without the creation ids of their registrations. The controller, as Kafka's
KafkaController, holds a proposed ISR to the brokers' liveness, not to the epochs the leader saw."""
from __future__ import annotations

from minikafka.broker.controller.quorum_controller import TopicIsrChanges
from minikafka.broker.controller.replication_control import IsrChange, NewTopic
from minikafka.broker.replication.replica import NO_BROKER_EPOCH, Replica
from minikafka.broker.zk.kafka_zk_client import KafkaZkClient
from minikafka.broker.zk.zookeeper_client import ZkClientConfig
from minikafka.protocol.errors import ErrorCode, KafkaError
from tests.zookeeper.elected_controller import elected_controller, live_brokers, register_broker

NOW = 1_000_000


def fetched(broker_epoch: int) -> Replica:
    replica = Replica(3)
    replica.update_fetch_state(5, 0, NOW, 5, broker_epoch, {})
    return replica


def test_a_live_broker_of_unknown_epoch_is_eligible_whatever_epoch_its_fetches_carry() -> None:
    assert fetched(99).isr_eligible({3: NO_BROKER_EPOCH})
    assert fetched(NO_BROKER_EPOCH).isr_eligible({3: NO_BROKER_EPOCH})


def test_known_epochs_still_fence_and_dead_brokers_stay_out() -> None:
    assert fetched(99).isr_eligible({3: 99})
    assert not fetched(98).isr_eligible({3: 99})  # a fetch from before the broker registered again
    assert not fetched(99).isr_eligible({})  # not a live broker
    assert not Replica(3).isr_eligible({3: NO_BROKER_EPOCH})  # never fetched under this leadership


async def test_the_controller_holds_isr_members_to_liveness_not_to_the_epochs_leaders_saw(zk_connect) -> None:
    """Kafka's KafkaController: a proposed ISR member must be live and not shutting down; the broker epoch its leader
    saw in its fetches (it cannot check it against the czxid) is not compared. Broker 2 stands for one restarted
    before this controller read /brokers/ids: still in the ISR, the leader knows its previous process's epoch."""
    async with KafkaZkClient.open(ZkClientConfig(zk_connect)) as zk:
        for broker_id in (1, 2, 3):
            await register_broker(zk, broker_id)
        async with elected_controller(zk) as controller:
            (created,) = await controller.create_topics([NewTopic("t", -1, -1, {0: [1, 2, 3]}, {})])
            assert not isinstance(created, KafkaError), created
            epochs = {b: controller.image.brokers[b].broker_epoch for b in (1, 2, 3)}

            async def alter(isr: list[tuple[int, int]]) -> ErrorCode:
                current = controller.image.topics["t"].partitions[0]
                ((result,),) = await controller.alter_partition(1, epochs[1], [TopicIsrChanges("t", None, [
                    IsrChange(0, current.leader_epoch, current.partition_epoch, isr)])])
                return result.error

            assert await alter([(1, epochs[1]), (2, epochs[2] - 1)]) is ErrorCode.NONE
            assert await alter([(1, -1), (2, epochs[2] - 1), (3, epochs[3])]) is ErrorCode.NONE
            assert controller.image.topics["t"].partitions[0].isr == [1, 2, 3]

            await controller.controlled_shutdown(3, epochs[3])  # out of the ISR, and not let back in
            assert await alter([(1, -1), (2, -1), (3, -1)]) is ErrorCode.INELIGIBLE_REPLICA
            live = await live_brokers(zk)
            await controller.sync_live_brokers({b: v for b, v in live.items() if b != 2})  # broker 2 is gone
            assert controller.image.topics["t"].partitions[0].isr == [1]
            assert await alter([(1, -1), (2, epochs[2])]) is ErrorCode.INELIGIBLE_REPLICA
