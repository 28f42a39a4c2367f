"""Kafka's ReplicationQuotaManager: a byte rate, over sample windows, that bounds replication of throttled
replicas (the leader's sending side or the follower's fetching side, one manager each).

Which replicas are throttled comes from the topic configs leader.replication.throttled.replicas and
follower.replication.throttled.replicas ("*" for all, or "partition:broker" pairs, of which this broker's count);
the bound is the dynamic broker config leader.replication.throttled.rate or follower.replication.throttled.rate.
Bytes of every throttled replica are recorded, in sync or not, so the bound covers all of their traffic; only a
replica outside the ISR is ever held back (the fetch path asks `is_quota_exceeded` for those alone), so catching up
never slows the replicas that acknowledge acks=all produces.

The rate is Kafka's: the bytes of the last `samples` windows of `window_s` each, divided by the time they span,
which counts as at least `samples - 1` whole windows — a fresh or idle manager admits a burst of about that many
windows' worth before it holds back.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sized
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from minikafka.broker.replication.partition import Partition

TopicPartition = tuple[str, int]
UNLIMITED = 2**63 - 1  # Kafka's Long.MAX_VALUE: no bound
ALL_REPLICAS = "*"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"


@dataclass(frozen=True)
class ReplicationQuotaManagerConfig:
    """replication.quota.window.num and replication.quota.window.size.seconds, and the bound in bytes/s."""

    quota_bytes_per_second: int = UNLIMITED
    samples: int = 11
    window_s: float = 1.0


class Rate:
    """A sampled rate in units per second (Kafka's Rate over a SampledStat): each sample covers one window from the
    time its first value came; samples older than all windows together are forgotten."""

    def __init__(self, samples: int, window_s: float) -> None:
        self._samples_allowed = max(samples, 2)
        self._window_s = window_s
        self._samples: deque[list[float]] = deque()  # [start, total]

    def _purge(self, now: float) -> None:
        expire_age = self._samples_allowed * self._window_s
        while self._samples and now - self._samples[0][0] >= expire_age:
            self._samples.popleft()

    def record(self, value: float, now: float) -> None:
        self._purge(now)
        if not self._samples or now - self._samples[-1][0] >= self._window_s:
            self._samples.append([now, 0.0])
            if len(self._samples) > self._samples_allowed:
                self._samples.popleft()
        self._samples[-1][1] += value

    def measure(self, now: float) -> float:
        self._purge(now)
        total = sum(value for _start, value in self._samples)
        elapsed = now - self._samples[0][0] if self._samples else 0.0
        full_windows = int(elapsed // self._window_s)
        minimum_full = self._samples_allowed - 1
        if full_windows < minimum_full:
            elapsed += (minimum_full - full_windows) * self._window_s
        return total / elapsed if elapsed > 0 else 0.0


def parse_throttled_replicas(value: str, broker_id: int) -> set[int] | str:
    """The partitions a throttled-replicas config names for `broker_id`: ALL_REPLICAS for "*", else the partition
    of each "partition:broker" pair whose broker is this one (entries that do not parse name nothing)."""
    text = value.strip()
    if text == ALL_REPLICAS:
        return ALL_REPLICAS
    partitions = set()
    for entry in filter(None, (e.strip() for e in text.split(","))):
        partition, _, broker = entry.partition(":")
        try:
            if int(broker) == broker_id:
                partitions.add(int(partition))
        except ValueError:
            continue
    return partitions


class ReplicationQuotaManager:
    """One side's replication quota: `is_throttled(tp)`, `is_quota_exceeded()`, `record(bytes)`."""

    def __init__(self, config: ReplicationQuotaManagerConfig | None = None,
                 clock: Callable[[], float] = trio.current_time) -> None:
        self.config = config or ReplicationQuotaManagerConfig()
        self._clock = clock
        self._rate = Rate(self.config.samples, self.config.window_s)
        self._bound = self.config.quota_bytes_per_second
        self._throttled: dict[str, set[int] | str] = {}

    @property
    def upper_bound(self) -> int:
        return self._bound

    def update_quota(self, bytes_per_second: int) -> None:
        self._bound = bytes_per_second

    def mark_throttled(self, topic: str, partitions: set[int] | str) -> None:
        """Throttle these partitions of `topic` (ALL_REPLICAS: every one), replacing what was throttled before."""
        if partitions:
            self._throttled[topic] = partitions
        else:
            self._throttled.pop(topic, None)

    def remove_throttle(self, topic: str) -> None:
        self._throttled.pop(topic, None)

    def is_throttled(self, tp: TopicPartition) -> bool:
        partitions = self._throttled.get(tp[0])
        return partitions is not None and (partitions == ALL_REPLICAS or tp[1] in partitions)

    def is_quota_exceeded(self) -> bool:
        """Whether the rate of the recorded bytes is above the bound (never, when there is none)."""
        return self._bound != UNLIMITED and self._rate.measure(self._clock()) > self._bound

    def record(self, size: int) -> None:
        if size > 0:
            self._rate.record(size, self._clock())

    def rate(self) -> float:
        """Bytes per second as the quota measures them now."""
        return self._rate.measure(self._clock())


class ReplicationQuotas:
    """A broker's leader and follower ReplicationQuotaManagers (the replication part of Kafka's QuotaManagers),
    kept current from the topics' throttled-replicas configs and the dynamic throttle rates."""

    def __init__(self, broker_id: int, samples: int = 11, window_s: float = 1.0,
                 clock: Callable[[], float] = trio.current_time) -> None:
        self.broker_id = broker_id
        config = ReplicationQuotaManagerConfig(samples=samples, window_s=window_s)
        self.leader = ReplicationQuotaManager(config, clock)
        self.follower = ReplicationQuotaManager(config, clock)

    def update_topic(self, topic: str, configs: Mapping[str, str] | None) -> None:
        """A topic's configs changed (None: the topic is gone)."""
        for quota, name in ((self.leader, LEADER_THROTTLED_REPLICAS), (self.follower, FOLLOWER_THROTTLED_REPLICAS)):
            if configs is None:
                quota.remove_throttle(topic)
            else:
                quota.mark_throttled(topic, parse_throttled_replicas(configs.get(name, ""), self.broker_id))

    def update_rates(self, leader_bytes_per_second: int, follower_bytes_per_second: int) -> None:
        self.leader.update_quota(leader_bytes_per_second)
        self.follower.update_quota(follower_bytes_per_second)

    def should_leader_throttle(self, partition: Partition, replica_id: int) -> bool:
        """Kafka's shouldLeaderThrottle: a follower outside the ISR fetching a throttled partition gets nothing
        while the leader's replication quota is exceeded."""
        quota = self.leader
        return (replica_id not in partition.isr and quota.is_throttled((partition.topic, partition.index))
                and quota.is_quota_exceeded())

    def record_leader_throttled_bytes(self, sent: Mapping[TopicPartition, Sized]) -> None:
        """Count toward the leader's quota the records a follower fetch answers for throttled partitions, in the
        ISR or not (Kafka records the whole throttled traffic)."""
        self.leader.record(sum(len(records) for tp, records in sent.items() if self.leader.is_throttled(tp)))
