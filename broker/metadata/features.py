"""The features a broker supports and the levels its cluster has finalized (KIP-584; Kafka's BrokerFeatures and
FinalizedFeatures), which ApiVersions v3+ tells clients.

A client changes protocol by them: the Java 4.x producer runs transactions at version 2 (KIP-890 part 2: partitions
added by Produce v12+ and TxnOffsetCommit v5, the epoch bumped by every EndTxn v5) only when `transaction.version`
2 is finalized; a ConsumerGroupHeartbeat is served only when `group.version` 1 (KIP-848's consumer rebalance
protocol) is finalized, and the share group APIs (KIP-932) only when `share.version` 1 is. The cluster is at the
levels Kafka 4.1 finalizes for a new cluster, except `share.version`, finalized at 1 as Kafka does once share groups
are generally available (4.2; 4.1 leaves it at 0). No UpdateFeatures changes them, so the feature epoch is constant.
"""
from __future__ import annotations

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
FINALIZED_FEATURES: dict[str, int] = {TRANSACTION_VERSION: 2, GROUP_VERSION: 1, SHARE_VERSION: 1}
FINALIZED_FEATURES_EPOCH = 1


def finalized_level(feature: str) -> int:
    """The cluster's level of `feature`; 0, a feature's level when it is not finalized."""
    return FINALIZED_FEATURES.get(feature, 0)


def share_groups_enabled() -> bool:
    """Whether the share group APIs are served (Kafka's KafkaApis.isShareGroupProtocolEnabled): share.version 1
    finalized; otherwise they answer UNSUPPORTED_VERSION before any other check."""
    return finalized_level(SHARE_VERSION) >= SHARE_GROUPS_SHARE_VERSION
