"""Group configs (resource type GROUP, 32) as Kafka 4.1 serves them: DescribeConfigs lists every group config with
the broker's defaults, IncrementalAlterConfigs sets a group's own values through the controller, validated against
the broker's group.* bounds with Kafka's messages, and the consumer group coordinator applies a group's session
timeout and heartbeat interval, on whichever broker coordinates the group."""
from __future__ import annotations

import uuid

import pytest
from kafka.protocol.admin.configs import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

import minikafka
from minikafka.protocol.client_apis.messages import ConsumerGroupHeartbeatRequest
from tests.helpers import wait_until
from tests.raw_client import RawConnection

GROUP = 32
SET, DELETE, APPEND = 0, 1, 2
DEFAULT_CONFIG, GROUP_CONFIG = 5, 8
INVALID_CONFIG, INVALID_REQUEST = 40, 42
COORDINATOR_NOT_READY = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
BOUNDS = {"group.consumer.min.session.timeout.ms": 1000, "group.consumer.min.heartbeat.interval.ms": 100,
          "group.consumer.session.timeout.ms": 4000, "group.consumer.heartbeat.interval.ms": 500}
BROKER = {name.replace(".", "_"): value for name, value in BOUNDS.items()}  # broker_factory's spelling
GROUP_CONFIGS = {  # Kafka 4.1's GroupConfig names, and their defaults on a broker with BOUNDS
    "consumer.heartbeat.interval.ms": "500", "consumer.session.timeout.ms": "4000",
    "share.auto.offset.reset": "latest", "share.heartbeat.interval.ms": "5000", "share.isolation.level":
    "read_uncommitted", "share.record.lock.duration.ms": "30000", "share.session.timeout.ms": "45000",
    "streams.heartbeat.interval.ms": "5000", "streams.num.standby.replicas": "0",
    "streams.session.timeout.ms": "45000"}


def alter(address: str, group: str, *configs: tuple[str, int, str | None], validate_only: bool = False):
    R = IncrementalAlterConfigsRequest[1]
    with RawConnection(address) as raw:
        response = raw.request(R(validate_only=validate_only, resources=[R.AlterConfigsResource(
            resource_type=GROUP, resource_name=group, configs=[R.AlterConfigsResource.AlterableConfig(
                name=n, config_operation=op, value=v) for n, op, v in configs])]))
    (result,) = response.responses
    return result.error_code, result.error_message


def describe(address: str, group: str, keys: list[str] | None = None) -> tuple[int, dict[str, tuple[str, int, bool]]]:
    R = DescribeConfigsRequest[4]
    with RawConnection(address) as raw:
        response = raw.request(R(resources=[R.DescribeConfigsResource(resource_type=GROUP, resource_name=group,
                                                                      configuration_keys=keys)],
                                 include_synonyms=False, include_documentation=False))
    (result,) = response.results
    return result.error_code, {c.name: (c.value, c.config_source, c.read_only) for c in result.configs}


def heartbeat_interval(address: str, group: str, topic: str) -> int | None:
    """The interval the group's coordinator gives a new member (ConsumerGroupHeartbeat v1), which leaves again; None
    while the coordinator is not ready (being elected or loading)."""
    with RawConnection(address) as raw:
        coordinator = raw.request(FindCoordinatorRequest[3](key=group, key_type=0))
    if coordinator.error_code in COORDINATOR_NOT_READY:
        return None
    assert coordinator.error_code == 0, coordinator
    R = ConsumerGroupHeartbeatRequest[1]
    member_id = str(uuid.uuid4())
    with RawConnection(f"{coordinator.host}:{coordinator.port}") as raw:
        joined = raw.request(R(group_id=group, member_id=member_id, member_epoch=0, instance_id=None, rack_id=None,
                               rebalance_timeout_ms=5000, subscribed_topic_names=[topic],
                               subscribed_topic_regex=None, server_assignor=None, topic_partitions=[]))
        if joined.error_code in COORDINATOR_NOT_READY:
            return None
        assert joined.error_code == 0, joined
        left = raw.request(R(group_id=group, member_id=member_id, member_epoch=-1, instance_id=None, rack_id=None,
                             rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
                             server_assignor=None, topic_partitions=None))
        assert left.error_code == 0, left
    return joined.heartbeat_interval_ms


def test_describe_lists_every_group_config_with_the_broker_defaults(broker_factory):
    broker = broker_factory(**BROKER)
    code, configs = describe(broker.bootstrap_servers, "never-seen")
    assert code == 0
    assert {name: value for name, (value, _s, _r) in configs.items()} == GROUP_CONFIGS
    assert {source for _v, source, _r in configs.values()} == {DEFAULT_CONFIG}
    assert not any(read_only for _v, _s, read_only in configs.values())
    code, configs = describe(broker.bootstrap_servers, "never-seen", ["consumer.session.timeout.ms"])
    assert configs == {"consumer.session.timeout.ms": ("4000", DEFAULT_CONFIG, False)}
    assert describe(broker.bootstrap_servers, "")[0] == INVALID_REQUEST


def test_a_group_config_set_deleted_and_refused_as_kafka(broker_factory):
    broker = broker_factory(**BROKER)
    address = broker.bootstrap_servers
    group = "configured"
    assert alter(address, group, ("consumer.session.timeout.ms", SET, "3000"),
                 ("share.auto.offset.reset", SET, "by_duration:PT1H")) == (0, None)
    code, configs = describe(address, group)
    assert configs["consumer.session.timeout.ms"] == ("3000", GROUP_CONFIG, False)
    assert configs["share.auto.offset.reset"] == ("by_duration:PT1H", GROUP_CONFIG, False)
    assert configs["consumer.heartbeat.interval.ms"] == ("500", DEFAULT_CONFIG, False)
    # Refused as a whole, with Kafka's messages; nothing changes.
    for change, message in [
        (("no.such.config", SET, "1"), "Unknown group config name: no.such.config"),
        (("consumer.session.timeout.ms", SET, "abc"),
         "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
        (("consumer.session.timeout.ms", SET, "0"),
         "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"),
        (("consumer.session.timeout.ms", SET, "999"),
         "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
        (("consumer.session.timeout.ms", SET, "60001"),
         "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
        (("consumer.session.timeout.ms", SET, "400"),
         "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
        (("consumer.heartbeat.interval.ms", SET, "3000"),
         "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"),
        (("share.isolation.level", SET, "read_most"),
         "Invalid value read_most for configuration share.isolation.level: String must be one of: "
         "read_committed, read_uncommitted"),
        (("share.auto.offset.reset", SET, "newest"),
         "Invalid value newest for configuration share.auto.offset.reset: Invalid value `newest` for configuration "
         "share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format "
         "'by_duration:<PnDTnHnMn.nS>'."),
        (("consumer.session.timeout.ms", APPEND, "1"),
         "Config value append/subtract is not allowed for config key: consumer.session.timeout.ms"),
    ]:
        assert alter(address, group, change) == (INVALID_CONFIG, message), change
    assert describe(address, group)[1] == configs
    # validate_only answers as the change would, and changes nothing.
    assert alter(address, group, ("consumer.heartbeat.interval.ms", SET, "200"), validate_only=True) == (0, None)
    assert describe(address, group)[1]["consumer.heartbeat.interval.ms"] == ("500", DEFAULT_CONFIG, False)
    # DELETE returns a config to the broker's default.
    assert alter(address, group, ("consumer.session.timeout.ms", DELETE, None)) == (0, None)
    assert describe(address, group)[1]["consumer.session.timeout.ms"] == ("4000", DEFAULT_CONFIG, False)


@pytest.mark.parametrize("restart", [False, True])
def test_the_coordinator_gives_members_the_groups_heartbeat_interval(broker_factory, unique_topic, restart):
    broker = broker_factory(**BROKER)
    broker.state.create_topic(unique_topic, partitions=2, replication_factor=1)
    address = broker.bootstrap_servers
    group = f"tuned-{restart}"
    wait_until(lambda: heartbeat_interval(address, group, unique_topic) == 500, 30, message="the broker's interval")
    assert alter(address, group, ("consumer.heartbeat.interval.ms", SET, "250")) == (0, None)
    if restart:  # the override is cluster metadata: it outlives the broker's memory
        broker.restart()
    wait_until(lambda: heartbeat_interval(broker.bootstrap_servers, group, unique_topic) == 250, 30,
               message="the group's own heartbeat interval")
    # Another group keeps the broker's.
    wait_until(lambda: heartbeat_interval(broker.bootstrap_servers, f"other-{restart}", unique_topic) == 500, 30,
               message="another group's interval")


def test_every_broker_of_a_cluster_applies_a_groups_config(tmp_path, unique_topic):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", config=BOUNDS) as cluster:
        cluster.state.create_topic(unique_topic, partitions=3, replication_factor=3)
        group = "cluster-wide"
        first = cluster.brokers[0].bootstrap_servers
        assert alter(first, group, ("consumer.heartbeat.interval.ms", SET, "300")) == (0, None)
        for broker in cluster.brokers:
            wait_until(lambda b=broker: describe(b.bootstrap_servers, group)[1][
                "consumer.heartbeat.interval.ms"] == ("300", GROUP_CONFIG, False), 30,
                message=f"broker {broker.node_id} describing the override")
        wait_until(lambda: heartbeat_interval(first, group, unique_topic) == 300, 30,
                   message="the coordinator giving the group's own interval")
