"""UpdateFeatures against a real broker: the levels ApiVersions tells and their epoch, upgrades and downgrades
with Kafka's errors, group.version 0 turning KIP-848's consumer protocol off and 1 on again for a confluent-kafka
consumer, and levels kept across a restart."""
from __future__ import annotations

import subprocess
import sys
import uuid

from confluent_kafka import Consumer, Producer
from kafka.protocol.admin.cluster import UpdateFeaturesRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest

import minikafka
from minikafka.protocol.client_apis.messages import ConsumerGroupHeartbeatRequest
from minikafka.protocol.errors import ErrorCode
from tests.helpers import admin_create_topic, wait_until
from tests.raw_client import RawConnection

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def finalized(conn: RawConnection) -> tuple[dict[str, int], int]:
    response = conn.request(ApiVersionsRequest[4](client_software_name="t", client_software_version="1"))
    assert {f.name: (f.min_version, f.max_version) for f in response.supported_features} == {
        "transaction.version": (0, 2), "group.version": (0, 1), "share.version": (0, 1)}
    return ({f.name: f.max_version_level for f in response.finalized_features},
            response.finalized_features_epoch)


def update(conn: RawConnection, *updates: tuple[str, int, int], version: int = 1, validate_only: bool = False):
    R = UpdateFeaturesRequest[version]
    keys = [R.FeatureUpdateKey(feature=name, max_version_level=level,
                               **({"upgrade_type": kind} if version >= 1 else {"allow_downgrade": kind != UPGRADE}))
            for name, level, kind in updates]
    return conn.request(R(timeout_ms=30000, feature_updates=keys,
                          **({"validate_only": validate_only} if version >= 1 else {})))


def heartbeat_error(conn: RawConnection, topic: str) -> int:
    joined = conn.request(ConsumerGroupHeartbeatRequest[1](
        group_id="g-" + uuid.uuid4().hex, member_id=str(uuid.uuid4()), member_epoch=0, instance_id=None,
        rack_id=None, rebalance_timeout_ms=30000, subscribed_topic_names=[topic], subscribed_topic_regex=None,
        server_assignor=None, topic_partitions=[]))
    return int(joined.error_code)


def consume_one(bootstrap: str, topic: str) -> bytes:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-" + uuid.uuid4().hex,
                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []

        def polled() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
            return bool(got)

        wait_until(polled, 60)
        return got[0]
    finally:
        consumer.close()


def test_a_new_cluster_finalizes_kafkas_levels_and_the_epoch_moves_with_each_update(broker):
    with RawConnection(broker.bootstrap_servers) as conn:
        levels, epoch = finalized(conn)
        assert levels == {"transaction.version": 2, "group.version": 1, "share.version": 1} and epoch >= 0
        checked = update(conn, ("share.version", 0, SAFE_DOWNGRADE), version=2, validate_only=True)
        assert (checked.error_code, checked.error_message, checked.results) == (ErrorCode.NONE, None, [])
        assert finalized(conn) == (levels, epoch)  # only validated: nothing changed
        done = update(conn, ("share.version", 0, UNSAFE_DOWNGRADE), ("transaction.version", 1, SAFE_DOWNGRADE))
        assert done.error_code == ErrorCode.NONE
        assert sorted((r.feature, r.error_code, r.error_message) for r in done.results) == [
            ("share.version", 0, None), ("transaction.version", 0, None)]  # ApiError.NONE: no message
        after, later_epoch = finalized(conn)  # answered once this broker has the new levels
        assert after == {"transaction.version": 1, "group.version": 1} and later_epoch > epoch
        assert update(conn, ("share.version", 1, UPGRADE), version=0).error_code == ErrorCode.NONE
        assert finalized(conn)[0]["share.version"] == 1


def test_invalid_updates_are_refused_with_kafkas_errors(broker):
    prefix = "The update failed for all features since the following feature had an error: "
    with RawConnection(broker.bootstrap_servers) as conn:
        before = finalized(conn)
        cases = [
            (("group.version", 0, UPGRADE), "Invalid update version 0 for feature group.version. Can't downgrade the "
             "version of this feature without setting the upgrade type to either safe or unsafe downgrade."),
            (("group.version", 2, UPGRADE), "Invalid update version 2 for feature group.version. Local controller "),
            (("no.such.feature", 1, UPGRADE), "Invalid update version 1 for feature no.such.feature. Local "
             "controller "),
            (("transaction.version", 2, 9), "Invalid update version 2 for feature transaction.version. The "
             "controller does not support the given upgrade type."),
        ]
        for case, message in cases:
            refused = update(conn, ("share.version", 0, SAFE_DOWNGRADE), case, version=2)
            assert refused.error_code == ErrorCode.INVALID_UPDATE_VERSION, case
            assert refused.error_message.startswith(prefix + message), refused.error_message
        assert finalized(conn) == before  # the valid update beside each refused one was not applied either


def test_group_version_0_turns_the_consumer_protocol_off_and_1_on_again_across_a_restart(broker_factory,
                                                                                       unique_topic):
    broker = broker_factory()
    admin_create_topic(broker.bootstrap_servers, unique_topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(unique_topic, b"v", partition=0)
    assert producer.flush(30) == 0
    with RawConnection(broker.bootstrap_servers) as conn:
        assert update(conn, ("group.version", 0, SAFE_DOWNGRADE)).error_code == ErrorCode.NONE
        assert "group.version" not in finalized(conn)[0]
        assert heartbeat_error(conn, unique_topic) == ErrorCode.UNSUPPORTED_VERSION
    broker.stop()
    broker.start()
    with RawConnection(broker.bootstrap_servers) as conn:
        assert "group.version" not in finalized(conn)[0]  # kept in the metadata log
        assert heartbeat_error(conn, unique_topic) == ErrorCode.UNSUPPORTED_VERSION
        assert update(conn, ("group.version", 1, UPGRADE)).error_code == ErrorCode.NONE
        assert heartbeat_error(conn, unique_topic) in (ErrorCode.NONE, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                                       ErrorCode.NOT_COORDINATOR)
    assert consume_one(broker.bootstrap_servers, unique_topic) == b"v"


def features_cli(broker, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minikafka", "features", *argv, "--bootstrap-server",
                           broker.bootstrap_servers], capture_output=True, text=True, timeout=120)


def test_the_cli_describes_upgrades_and_downgrades_as_kafka_features_sh(broker):
    dry = features_cli(broker, "downgrade", "--feature", "share.version=0", "--dry-run")
    assert (dry.returncode, dry.stdout) == (0, "share.version can be downgraded to 0.\n")
    done = features_cli(broker, "downgrade", "--feature", "share.version=0", "--unsafe")
    assert (done.returncode, done.stdout) == (0, "share.version was downgraded to 0.\n")
    described = features_cli(broker, "describe")
    assert described.returncode == 0
    lines = described.stdout.splitlines()
    epoch = lines[0].rsplit("Epoch: ", 1)[1]
    assert int(epoch) > 0 and lines == [
        f"Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\t"
        f"Epoch: {epoch}",
        f"Feature: share.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 0\t"
        f"Epoch: {epoch}",
        f"Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\tFinalizedVersionLevel: 2\t"
        f"Epoch: {epoch}"]
    refused = features_cli(broker, "upgrade", "--feature", "share.version=2")
    assert refused.returncode == 1
    assert refused.stdout.startswith("Could not upgrade share.version to 2. The update failed for all features "
                                     "since the following feature had an error: Invalid update version 2 for "
                                     "feature share.version.")
    assert refused.stderr == "Error: 1 out of 1 operation(s) failed.\n"
    assert features_cli(broker, "upgrade", "--feature", "share.version=1").stdout == (
        "share.version was upgraded to 1.\n")


def test_an_update_needs_alter_on_the_cluster():
    users = {"alice": "alice-secret"}
    with minikafka.Broker(security="SASL_PLAINTEXT", users=users, acls=[]) as secured:
        def alice() -> RawConnection:
            return RawConnection(secured.bootstrap_servers).authenticate_plain("alice", users["alice"])

        with alice() as conn:
            before = finalized(conn)
            refused = update(conn, ("group.version", 0, SAFE_DOWNGRADE), version=2)
            assert (refused.error_code, refused.results) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
            assert finalized(conn) == before
        secured.add_acls(minikafka.Acl("User:alice", "ALTER", cluster=True))
        with alice() as conn:
            assert update(conn, ("group.version", 0, SAFE_DOWNGRADE), version=2).error_code == ErrorCode.NONE
            assert "group.version" not in finalized(conn)[0]
