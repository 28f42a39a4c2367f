"""Finalized features on a 3-broker cluster in both controller modes: an update sent to one broker reaches every
broker's ApiVersions and survives a restart of the controller and of the brokers (KRaft: FeatureLevelRecords in
the metadata log; ZooKeeper mode: the /feature znode the brokers watch)."""
from __future__ import annotations

import pytest
from kafka.protocol.admin.cluster import UpdateFeaturesRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest

import minikafka
from minikafka.protocol.errors import ErrorCode
from tests.cluster.cluster_modes import CLUSTER_MODES
from tests.helpers import wait_until
from tests.raw_client import RawConnection

NEW_CLUSTER = {"transaction.version": 2, "group.version": 1, "share.version": 1}
SAFE_DOWNGRADE = 2


def finalized(broker: minikafka.Broker) -> dict[str, int]:
    with RawConnection(broker.bootstrap_servers) as conn:
        response = conn.request(ApiVersionsRequest[4](client_software_name="t", client_software_version="1"))
    return {f.name: f.max_version_level for f in response.finalized_features}


def downgrade(broker: minikafka.Broker, feature: str, level: int):
    R = UpdateFeaturesRequest[2]
    with RawConnection(broker.bootstrap_servers) as conn:
        return conn.request(R(timeout_ms=30000, validate_only=False, feature_updates=[
            R.FeatureUpdateKey(feature=feature, max_version_level=level, upgrade_type=SAFE_DOWNGRADE)]))


@pytest.mark.parametrize("zookeeper", CLUSTER_MODES)
def test_an_update_reaches_every_broker_and_survives_restarts(tmp_path, zookeeper):
    with minikafka.Cluster(brokers=3, data_dir=tmp_path / "cluster", zookeeper=zookeeper) as cluster:
        assert all(finalized(b) == NEW_CLUSTER for b in cluster.brokers)
        if zookeeper:
            cluster.wait_for_controller()
        response = downgrade(cluster.brokers[1], "transaction.version", 1)
        assert response.error_code == ErrorCode.NONE
        expected = {**NEW_CLUSTER, "transaction.version": 1}
        assert finalized(cluster.brokers[1]) == expected  # answered once the broker that forwarded it has it
        wait_until(lambda: all(finalized(b) == expected for b in cluster.brokers), 60)
        controller = cluster.controller
        controller.stop()
        controller.start()
        for broker in cluster.brokers:
            broker.stop()
            broker.start()
        assert all(finalized(b) == expected for b in cluster.brokers)
