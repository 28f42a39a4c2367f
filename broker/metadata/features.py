"""The features a broker supports and the levels its cluster has finalized (KIP-584; Kafka's BrokerFeatures,
FinalizedFeatures and FeatureControlManager's checks), which ApiVersions v3+ tells clients.

A client changes protocol by them: the Java 4.x producer runs transactions at version 2 (KIP-890 part 2: partitions
added by Produce v12+ and TxnOffsetCommit v5, the epoch bumped by every EndTxn v5) only when `transaction.version`
2 is finalized; a ConsumerGroupHeartbeat is served only when `group.version` 1 (KIP-848's consumer rebalance
protocol) is finalized, and the share group APIs (KIP-932) only when `share.version` 1 is.

A new cluster is at the levels Kafka 4.1 finalizes, except `share.version`, finalized at 1 as Kafka does once share
groups are generally available (4.2; 4.1 leaves it at 0). UpdateFeatures (kafka-features.sh upgrade / downgrade)
changes a level: the controller writes a FeatureLevelRecord (KRaft) or the /feature znode (ZooKeeper mode), and a
level so written replaces the default. The epoch clients compare levels by moves with every such change.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
# group.version's level from which the consumer rebalance protocol is served (Kafka's GroupVersion.GV_1).
CONSUMER_REBALANCE_PROTOCOL_GROUP_VERSION = 1
SHARE_VERSION = "share.version"
# share.version's level from which share groups are served (Kafka's ShareVersion.SV_1).
SHARE_GROUPS_SHARE_VERSION = 1


class SupportedVersionRange(NamedTuple):
    min_version: int
    max_version: int


SUPPORTED_FEATURES: dict[str, SupportedVersionRange] = {TRANSACTION_VERSION: SupportedVersionRange(0, 2),
                                                         GROUP_VERSION: SupportedVersionRange(0, 1),
                                                         SHARE_VERSION: SupportedVersionRange(0, 1)}
# A new cluster's finalized levels, each until an UpdateFeatures changes it.
DEFAULT_FINALIZED_LEVELS: dict[str, int] = {TRANSACTION_VERSION: 2, GROUP_VERSION: 1, SHARE_VERSION: 1}
# The epoch of the default levels; a change of them is answered with a later one.
DEFAULT_FEATURES_EPOCH = 1

# UpdateFeatures' upgrade types (Kafka's FeatureUpdate.UpgradeType).
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def finalized_levels(written: Mapping[str, int]) -> dict[str, int]:
    """Every finalized feature's level: the defaults, with the levels UpdateFeatures wrote in their place."""
    return {**DEFAULT_FINALIZED_LEVELS, **written}


def levels_of_listing(listed: Mapping[str, int]) -> dict[str, int]:
    """The levels a full listing of finalized features gives (ZooKeeper's /feature, where a feature left out is
    off), as written levels: every supported feature's, 0 for those not listed."""
    return {**{name: 0 for name in SUPPORTED_FEATURES}, **listed}


def finalized_level(feature: str, written: Mapping[str, int]) -> int:
    """The cluster's level of `feature`; 0, a feature's level when it is not finalized."""
    return finalized_levels(written).get(feature, 0)


def share_groups_enabled(written: Mapping[str, int]) -> bool:
    """Whether the share group APIs are served (Kafka's KafkaApis.isShareGroupProtocolEnabled): share.version 1
    finalized; otherwise they answer UNSUPPORTED_VERSION before any other check."""
    return finalized_level(SHARE_VERSION, written) >= SHARE_GROUPS_SHARE_VERSION


def _range_text(r: SupportedVersionRange) -> str:
    return str(r.min_version) if r.min_version == r.max_version else f"{r.min_version}-{r.max_version}"


def feature_update_error(feature: str, level: int, upgrade_type: int, written: Mapping[str, int],
                         node_id: int) -> str | None:
    """Why the controller `node_id` refuses to set `feature` to `level` (Kafka's FeatureControlManager
    .updateFeature, every node supporting what this one does), as INVALID_UPDATE_VERSION's message; None when it
    may."""
    def invalid(message: str) -> str:
        return f"Invalid update version {level} for feature {feature}. {message}"

    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return invalid("The controller does not support the given upgrade type.")
    if level < 0:
        return invalid("A feature version cannot be less than 0.")
    supported = SUPPORTED_FEATURES.get(feature, SupportedVersionRange(0, 0))
    if not supported.min_version <= level <= supported.max_version:
        if supported.max_version == 0:
            return invalid(f"Local controller {node_id} does not support this feature.")
        return invalid(f"Local controller {node_id} only supports versions {_range_text(supported)}")
    current = finalized_level(feature, written)
    if level < current and upgrade_type == UPGRADE:
        return invalid("Can't downgrade the version of this feature without setting the upgrade type to either "
                       "safe or unsafe downgrade.")
    if level > current and upgrade_type != UPGRADE:
        return invalid("Can't downgrade to a newer version.")
    return None
