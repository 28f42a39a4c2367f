"""Finalized features (KIP-584): the levels a cluster starts at, what an UpdateFeatures may change as Kafka's
FeatureControlManager checks it, the FeatureLevelRecord's bytes and replay, and ZooKeeper's /feature znode."""
from __future__ import annotations

from minikafka.broker.metadata.features import (
    SAFE_DOWNGRADE,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    feature_update_error,
    finalized_levels,
    levels_of_listing,
    share_groups_enabled,
)
from minikafka.broker.metadata.metadata_image import MetadataImage
from minikafka.broker.zk.zk_data import decode_feature_znode, encode_feature_znode
from minikafka.protocol.metadata_records import FeatureLevelRecord, decode_record, encode_record


def test_a_new_cluster_finalizes_kafkas_levels_and_share_groups_on():
    assert finalized_levels({}) == {"transaction.version": 2, "group.version": 1, "share.version": 1}
    assert share_groups_enabled({}) and not share_groups_enabled({"share.version": 0})


def test_updates_are_checked_as_kafkas_controller_checks_them():
    def error(feature, level, upgrade_type=UPGRADE, written=None):
        return feature_update_error(feature, level, upgrade_type, written or {}, 3000)

    assert error("share.version", 0) == ("Invalid update version 0 for feature share.version. Can't downgrade the "
                                         "version of this feature without setting the upgrade type to either safe "
                                         "or unsafe downgrade.")
    assert error("share.version", 0, SAFE_DOWNGRADE) is None
    assert error("share.version", 0, UNSAFE_DOWNGRADE) is None
    assert error("share.version", 1, SAFE_DOWNGRADE, {"share.version": 0}) == (
        "Invalid update version 1 for feature share.version. Can't downgrade to a newer version.")
    assert error("share.version", 1, UPGRADE, {"share.version": 0}) is None
    assert error("share.version", 1, SAFE_DOWNGRADE) is None  # the same level: nothing to refuse
    assert error("share.version", 2) == ("Invalid update version 2 for feature share.version. Local controller 3000 "
                                         "only supports versions 0-1")
    assert error("metadata.version", 27) == ("Invalid update version 27 for feature metadata.version. Local "
                                             "controller 3000 does not support this feature.")
    assert error("share.version", -1, SAFE_DOWNGRADE) == ("Invalid update version -1 for feature share.version. "
                                                          "A feature version cannot be less than 0.")
    assert error("share.version", 0, 4).endswith("The controller does not support the given upgrade type.")


def test_the_feature_level_record_is_kafkas_and_replays_into_the_image():
    record = FeatureLevelRecord(name="share.version", feature_level=0)
    # Frame version 1, type 12, record version 0, compact string, int16 level, no tagged fields.
    assert encode_record(record) == bytes.fromhex("010c00") + b"\x0eshare.version" + bytes.fromhex("000000")
    image = MetadataImage()
    epoch = image.features_epoch
    image.replay(decode_record(encode_record(record)), offset=0)
    assert image.features == {"share.version": 0} and image.features_epoch > epoch
    assert finalized_levels(image.features)["share.version"] == 0
    image.replay(FeatureLevelRecord(name="share.version", feature_level=1), offset=7)
    assert finalized_levels(image.features)["share.version"] == 1 and image.features_epoch > epoch + 1


def test_the_feature_znode_lists_the_features_that_are_on():
    data = encode_feature_znode({"share.version": 0, "group.version": 1, "transaction.version": 2})
    assert data == (b'{"version":2,"status":1,"features":{"group.version":{"min_version_level":1,'
                    b'"max_version_level":1},"transaction.version":{"min_version_level":2,"max_version_level":2}}}')
    # A feature the znode leaves out is off.
    assert levels_of_listing(decode_feature_znode(data)) == {"transaction.version": 2, "group.version": 1,
                                                            "share.version": 0}
