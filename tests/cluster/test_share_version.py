"""share.version changed at run time with UpdateFeatures (what kafka-features.sh upgrade / downgrade sends), in both
controller modes: the controller refuses what Kafka's refuses, every broker follows a change (share groups off at 0,
on again at 1, ApiVersions' finalized levels and epoch), and the level outlives a restart of the cluster."""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin.cluster import UpdateFeaturesRequest
from kafka.protocol.metadata import ApiVersionsRequest

import minikafka
from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.helpers import wait_until
from tests.raw_client import RawConnection
from tests.share_consumer import ShareMember

UNSUPPORTED_VERSION, INVALID_UPDATE_VERSION = 35, 95
UPGRADE, SAFE_DOWNGRADE = 1, 2


def update(bootstrap: str, feature: str, level: int, upgrade_type: int = UPGRADE, version: int = 1,
           validate_only: bool = False) -> object:
    R = UpdateFeaturesRequest[version]
    key = (R.FeatureUpdateKey(feature=feature, max_version_level=level, upgrade_type=upgrade_type) if version >= 1
           else R.FeatureUpdateKey(feature=feature, max_version_level=level,
                                   allow_downgrade=upgrade_type != UPGRADE))
    fields = {"validate_only": validate_only} if version >= 1 else {}
    with RawConnection(bootstrap) as raw:
        return raw.request(R(timeout_ms=30000, feature_updates=[key], **fields))


def finalized(bootstrap: str) -> tuple[dict[str, int], int]:
    with RawConnection(bootstrap) as raw:
        response = raw.request(ApiVersionsRequest[4](client_software_name="t", client_software_version="1"))
    return {f.name: f.max_version_level for f in response.finalized_features}, response.finalized_features_epoch


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_share_version_is_switched_off_and_on_with_update_features(tmp_path, zookeeper):
    cluster = minikafka.Cluster(brokers=2, data_dir=tmp_path / "cluster", zookeeper=zookeeper)
    with cluster:
        first, second = (b.bootstrap_servers for b in cluster.brokers)
        topic = f"t-{uuid.uuid4()}"
        admin = AdminClient({"bootstrap.servers": first})
        admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(30)
        levels, epoch = finalized(first)
        assert levels["share.version"] == 1

        # Kafka's refusals, the whole request refused: nothing changes.
        refused = update(first, "share.version", 0)
        assert refused.error_code == INVALID_UPDATE_VERSION and refused.error_message == (
            "The update failed for all features since the following feature had an error: Invalid update version 0 "
            "for feature share.version. Can't downgrade the version of this feature without setting the upgrade "
            "type to either safe or unsafe downgrade.")
        assert "only supports versions 0-1" in update(first, "share.version", 2).error_message
        assert "does not support this feature." in update(first, "no.such.feature", 1).error_message
        assert update(first, "share.version", 0, SAFE_DOWNGRADE, validate_only=True).error_code == 0
        assert finalized(second)[0]["share.version"] == 1

        # Off: both brokers refuse share groups, and ApiVersions leaves the feature out at a later epoch.
        downgraded = update(first, "share.version", 0, SAFE_DOWNGRADE)
        assert (downgraded.error_code, [(r.feature, r.error_code) for r in downgraded.results]) == (
            0, [("share.version", 0)])
        assert "share.version" not in finalized(first)[0] and finalized(first)[1] > epoch
        wait_until(lambda: "share.version" not in finalized(second)[0], timeout=30,
                   message="the second broker to follow the downgrade")
        assert "Can't downgrade to a newer version." in update(first, "share.version", 1,
                                                               SAFE_DOWNGRADE).error_message
        member = ShareMember(first, f"share-{uuid.uuid4()}", [topic])
        try:
            assert member.heartbeat().error_code == UNSUPPORTED_VERSION
            # On again, v0's request form.
            assert update(second, "share.version", 1, UPGRADE, version=0).error_code == 0
            wait_until(lambda: finalized(first)[0].get("share.version") == 1, timeout=30,
                       message="the first broker to follow the upgrade")
            joined = member.heartbeat()
            assert (joined.error_code, joined.member_epoch) == (0, 1)
        finally:
            member.close()
        # Off again, and kept over a restart of the whole cluster.
        assert update(second, "share.version", 0, SAFE_DOWNGRADE, version=2).error_code == 0
    with cluster.start():
        for broker in cluster.brokers:
            wait_until(lambda b=broker: "share.version" not in finalized(b.bootstrap_servers)[0], timeout=30,
                       message=f"broker {broker.node_id} to have share.version 0 after the restart")
        assert finalized(cluster.brokers[0].bootstrap_servers)[0]["group.version"] == 1
