"""ReplicationQuotaManager: Kafka's sampled rate, the throttled-replicas configs, and the quota check."""
from __future__ import annotations

import pytest

from minikafka.broker.replication.replication_quota_manager import (
    ALL_REPLICAS,
    UNLIMITED,
    Rate,
    ReplicationQuotaManager,
    ReplicationQuotaManagerConfig,
    ReplicationQuotas,
    parse_throttled_replicas,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_young_rate_counts_at_least_all_but_one_window() -> None:
    rate = Rate(samples=11, window_s=1.0)
    rate.record(1000, now=0.0)
    assert rate.measure(0.0) == pytest.approx(100.0)  # 1000 bytes over 10 windows
    assert rate.measure(5.5) == pytest.approx(1000 / 10.5)  # 5.5 s, plus the 5 whole windows still missing


def test_a_rate_over_full_windows_and_forgetting_old_samples() -> None:
    rate = Rate(samples=3, window_s=1.0)
    for second in range(6):
        rate.record(300, now=float(second))
    # samples started at 3, 4 and 5 remain: 900 bytes over the 2.5 s since the oldest began
    assert rate.measure(5.5) == pytest.approx(900 / 2.5)
    assert rate.measure(100.0) == 0.0  # everything expired


def test_throttled_replicas_configs() -> None:
    assert parse_throttled_replicas("*", 1) == ALL_REPLICAS
    assert parse_throttled_replicas(" * ", 1) == ALL_REPLICAS
    assert parse_throttled_replicas("0:1,0:2,1:2,3:1", 1) == {0, 3}
    assert parse_throttled_replicas("0:1, 2:1,junk,x:1", 1) == {0, 2}
    assert parse_throttled_replicas("", 1) == set()


def test_is_throttled_follows_the_marks() -> None:
    quota = ReplicationQuotaManager()
    quota.mark_throttled("t", {0, 2})
    assert quota.is_throttled(("t", 0)) and quota.is_throttled(("t", 2))
    assert not quota.is_throttled(("t", 1)) and not quota.is_throttled(("u", 0))
    quota.mark_throttled("u", ALL_REPLICAS)
    assert quota.is_throttled(("u", 7))
    quota.mark_throttled("t", set())
    assert not quota.is_throttled(("t", 0))
    quota.remove_throttle("u")
    assert not quota.is_throttled(("u", 7))


def test_the_quota_is_exceeded_above_the_bound_and_recovers() -> None:
    clock = Clock()
    quota = ReplicationQuotaManager(ReplicationQuotaManagerConfig(quota_bytes_per_second=100), clock)
    assert not quota.is_quota_exceeded()
    quota.record(1000)  # exactly 100 bytes/s over the ten windows a young rate counts
    assert not quota.is_quota_exceeded()
    quota.record(1)
    assert quota.is_quota_exceeded()
    clock.now += 11.0  # every sample expired
    assert not quota.is_quota_exceeded()


def test_an_unbounded_quota_is_never_exceeded() -> None:
    quota = ReplicationQuotaManager(clock=Clock())
    assert quota.upper_bound == UNLIMITED
    quota.record(10**15)
    assert not quota.is_quota_exceeded()
    quota.update_quota(10)
    assert quota.is_quota_exceeded()


def test_a_long_transfer_at_the_bound_averages_the_bound() -> None:
    """Fetching whenever the quota allows, in 10 KB steps every 10 ms, moves about bound bytes a second plus the
    burst a young rate admits."""
    clock = Clock()
    quota = ReplicationQuotaManager(ReplicationQuotaManagerConfig(quota_bytes_per_second=50_000), clock)
    moved = 0
    start = clock.now
    for _ in range(3000):  # 30 s
        if not quota.is_quota_exceeded():
            quota.record(10_000)
            moved += 10_000
        clock.now += 0.01
    elapsed = clock.now - start
    assert 50_000 * elapsed * 0.9 <= moved <= 50_000 * (elapsed + 10) + 10_000


def test_replication_quotas_follow_topic_configs_and_rates() -> None:
    quotas = ReplicationQuotas(broker_id=2)
    quotas.update_topic("t", {"leader.replication.throttled.replicas": "0:1,1:2",
                              "follower.replication.throttled.replicas": "*"})
    assert not quotas.leader.is_throttled(("t", 0)) and quotas.leader.is_throttled(("t", 1))
    assert quotas.follower.is_throttled(("t", 0)) and quotas.follower.is_throttled(("t", 5))
    quotas.update_topic("t", {})
    assert not quotas.follower.is_throttled(("t", 0))
    quotas.update_topic("t", {"follower.replication.throttled.replicas": "*"})
    quotas.update_topic("t", None)
    assert not quotas.follower.is_throttled(("t", 0))
    quotas.update_rates(10, 20)
    assert (quotas.leader.upper_bound, quotas.follower.upper_bound) == (10, 20)
