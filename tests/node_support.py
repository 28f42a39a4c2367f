"""A combined node in this test's trio loop, with a topic created through its controller, for tests that talk to a
broker's listener or look at its insides."""
from __future__ import annotations

import trio
import trio.testing

from minikafka.broker.controller.replication_control import NewTopic
from minikafka.broker.kafka_node import KafkaNode
from minikafka.broker.server.broker_server import BrokerServer
from minikafka.config import BrokerConfig

# While the node starts, a mock clock jumps only after this much real idleness: the controller writes its metadata
# log on a worker thread, which an autojumping clock would take for idle time and run every timer through.
SETUP_AUTOJUMP_THRESHOLD_S = 0.05


async def start_broker_with_topic(nursery: trio.Nursery, config: BrokerConfig, topic: str,
                                  partitions: int) -> BrokerServer:
    """The node's broker, ready, once it has replayed the topic's creation; `stop()` on it stops the node."""
    clock = trio.lowlevel.current_clock()
    threshold = clock.autojump_threshold if isinstance(clock, trio.testing.MockClock) else None
    if isinstance(clock, trio.testing.MockClock):
        clock.autojump_threshold = max(clock.autojump_threshold, SETUP_AUTOJUMP_THRESHOLD_S)
    try:
        node: KafkaNode = await nursery.start(KafkaNode(config).run)
        assert node.controller is not None and node.broker is not None
        created = await node.controller.controller.create_topics([NewTopic(topic, partitions, 1, {}, {})],
                                                                  validate_only=False)
        assert not isinstance(created[0], Exception), created
        assert await node.broker.forwarding.catch_up()
    finally:
        if isinstance(clock, trio.testing.MockClock) and threshold is not None:
            clock.autojump_threshold = threshold
    return node.broker
