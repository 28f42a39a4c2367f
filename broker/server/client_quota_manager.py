"""Client quotas enforced on a broker (Kafka's ClientQuotaManager, ClientRequestQuotaManager and QuotaFactory).

What a client uses is measured per quota: produce request bytes against producer_byte_rate, fetch response bytes
against consumer_byte_rate, and request handling time, as a percentage of one second, against request_percentage.
Each is a rate as Kafka's Rate measures it: a total over `quota.window.num` samples of `quota.window.size.seconds`
each, divided by the time they span, never less than all but one full window (so a first burst is not measured
over a few milliseconds). A value is recorded, then the rate checked: over the quota, the client is throttled for
as long as it takes the rate, with nothing more recorded, to fall to the quota: (rate - quota) / quota * window.

Which quota applies is resolved on every request from the metadata image, in Kafka's order of precedence, most
specific first: user and client id, user and default client id, user, default user and client id, default user
and default client id, default user, client id, default client id. The first entity holding the quota's key
decides, and it also decides what is measured together: a quota of a user (or the default user) is shared by all
of that user's clients, one of a client id by all users of it, one of a user and client id by that pair only. A
PLAINTEXT connection's user is ANONYMOUS. Requests between brokers (a follower's fetch, control-plane APIs) are
never throttled.

Throttling follows KIP-219: the response carries throttle_time_ms and goes out at once, and the broker then mutes
the connection (reads nothing more from it) for that long; to a request version from before KIP-219, which
clients do not back off by themselves, the broker instead holds the response back for that long.
"""
from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from minikafka.broker.metadata.client_quota_entity import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    ClientQuotaEntity,
    ClientQuotas,
)
from minikafka.protocol.api_keys import ApiKey

QUOTA_WINDOW_NUM = 11  # Kafka's quota.window.num
QUOTA_WINDOW_SIZE_SECONDS = 1  # Kafka's quota.window.size.seconds
ANONYMOUS = "ANONYMOUS"  # the user of an unauthenticated connection (Kafka's KafkaPrincipal.ANONYMOUS)

# The first version of each API whose clients back off by themselves on throttle_time_ms (KIP-219, Kafka's
# AbstractResponse.shouldClientThrottle); an API not listed never does, so its responses are held back instead.
CLIENT_THROTTLES_FROM: dict[int, int] = {
    ApiKey.PRODUCE: 6, ApiKey.FETCH: 8, ApiKey.LIST_OFFSETS: 3, ApiKey.METADATA: 6, ApiKey.OFFSET_COMMIT: 4,
    ApiKey.OFFSET_FETCH: 4, ApiKey.FIND_COORDINATOR: 2, ApiKey.JOIN_GROUP: 3, ApiKey.HEARTBEAT: 2,
    ApiKey.LEAVE_GROUP: 2, ApiKey.SYNC_GROUP: 2, ApiKey.DESCRIBE_GROUPS: 2, ApiKey.LIST_GROUPS: 2,
    ApiKey.API_VERSIONS: 2, ApiKey.CREATE_TOPICS: 3, ApiKey.DELETE_TOPICS: 2, ApiKey.DELETE_RECORDS: 1,
    ApiKey.INIT_PRODUCER_ID: 1, ApiKey.DESCRIBE_CONFIGS: 2, ApiKey.ALTER_CONFIGS: 1, ApiKey.CREATE_PARTITIONS: 1,
    ApiKey.DELETE_GROUPS: 1, ApiKey.ELECT_LEADERS: 0, ApiKey.INCREMENTAL_ALTER_CONFIGS: 0, ApiKey.OFFSET_DELETE: 0,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: 0, ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
}


def client_throttles(api_key: int, version: int) -> bool:
    """Whether a client backs off by itself after a throttled response of this API version (KIP-219)."""
    first = CLIENT_THROTTLES_FROM.get(api_key)
    return first is not None and version >= first


@dataclass(frozen=True)
class QuotaConfig:
    samples: int = QUOTA_WINDOW_NUM
    window_ms: int = QUOTA_WINDOW_SIZE_SECONDS * 1000


@dataclass
class _Sample:
    start_ms: float
    last_event_ms: float
    value: float = 0.0

    def reset(self, now_ms: float) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0


class Rate:
    """Kafka's Rate over a SampledTotal: samples of `window_ms`, at most `samples` + 1 kept (one may straddle the
    start of the measured span), a sample with no event for `samples` windows reset."""

    def __init__(self, config: QuotaConfig) -> None:
        self._config = config
        self._samples: list[_Sample] = []
        self._current = 0

    @property
    def last_event_ms(self) -> float:
        return max((s.last_event_ms for s in self._samples), default=float("-inf"))

    def record(self, value: float, now_ms: float) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self._config.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def measure(self, now_ms: float) -> float:
        """Per second."""
        self._purge_obsolete(now_ms)
        return sum(s.value for s in self._samples) / (self.window_size_ms(now_ms) / 1000)

    def window_size_ms(self, now_ms: float) -> float:
        self._purge_obsolete(now_ms)
        elapsed = now_ms - min((s.start_ms for s in self._samples), default=now_ms)
        full_windows = int(elapsed // self._config.window_ms)
        if full_windows < self._config.samples - 1:
            elapsed += (self._config.samples - 1 - full_windows) * self._config.window_ms
        return max(elapsed, 1.0)

    def _current_sample(self, now_ms: float) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: float) -> _Sample:
        self._current = (self._current + 1) % (self._config.samples + 1)
        if self._current >= len(self._samples):
            self._samples.append(_Sample(now_ms, now_ms))
        else:
            self._samples[self._current].reset(now_ms)
        return self._samples[self._current]

    def _purge_obsolete(self, now_ms: float) -> None:
        expire_age = self._config.samples * self._config.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)


# What a quota is measured by: (user, client id), either "" when the quota is not by that part (Kafka's metric
# tags of a client's quota sensor).
QuotaMetricTags = tuple[str, str]


def resolve_quota(quotas: ClientQuotas, key: str, user: str, client_id: str) -> tuple[QuotaMetricTags, float] | None:
    """The quota of `key` that applies to this user and client id, and what it is measured by; None when no
    entity in the precedence order holds one."""
    if not quotas:  # the common case, asked on every request: no client quota set anywhere
        return None
    candidates: list[tuple[ClientQuotaEntity, QuotaMetricTags]] = [
        (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
        (((CLIENT_ID, None), (USER, user)), (user, client_id)),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
        (((CLIENT_ID, None), (USER, None)), (user, client_id)),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, None),), ("", client_id)),
    ]
    for entity, tags in candidates:
        value = quotas.get(entity, {}).get(key)
        if value is not None:
            return tags, value
    return None


class ClientQuotaManager:
    """One quota type's sensors: a Rate per metric tags, made on first use and dropped once idle for the whole
    measured span (its rate would be zero)."""

    def __init__(self, key: str, quotas: Callable[[], ClientQuotas], config: QuotaConfig | None = None,
                 clock_ms: Callable[[], float] | None = None) -> None:
        self.key = key
        self._quotas = quotas
        self.config = config or QuotaConfig()
        self._clock_ms = clock_ms or (lambda: trio.current_time() * 1000)  # a window follows the node's clock
        self._sensors: dict[QuotaMetricTags, Rate] = {}
        self._last_expiry_ms = float("-inf")

    def now_ms(self) -> float:
        return self._clock_ms()

    def quota(self, user: str, client_id: str) -> tuple[QuotaMetricTags, float] | None:
        return resolve_quota(self._quotas(), self.key, user, client_id)

    def record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float,
                                        now_ms: float | None = None) -> int:
        """Record `value` against the applicable quota; the throttle time its rate now calls for (0 within the
        quota or without one)."""
        now = self.now_ms() if now_ms is None else now_ms
        found = self.quota(user, client_id)
        if found is None:
            return 0
        tags, bound = found
        self._expire_idle(now)
        rate = self._sensors.get(tags)
        if rate is None:
            rate = self._sensors[tags] = Rate(self.config)
        rate.record(value, now)
        observed = rate.measure(now)
        if observed <= bound:
            return 0
        return round((observed - bound) / bound * rate.window_size_ms(now))

    def unrecord(self, user: str, client_id: str, value: float, now_ms: float | None = None) -> None:
        """Take back a recorded value (a throttled fetch answers no records)."""
        now = self.now_ms() if now_ms is None else now_ms
        found = self.quota(user, client_id)
        if found is not None and found[0] in self._sensors:
            self._sensors[found[0]].record(-value, now)

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """The most one request may take and still possibly be within the quota: a fetch asks for no more."""
        found = self.quota(user, client_id)
        if found is None:
            return float("inf")
        return found[1] * (self.config.samples - 1) * self.config.window_ms / 1000

    def _expire_idle(self, now_ms: float) -> None:
        span = self.config.samples * self.config.window_ms
        if now_ms - self._last_expiry_ms < span:
            return
        self._last_expiry_ms = now_ms
        for tags in [t for t, rate in self._sensors.items() if now_ms - rate.last_event_ms >= span]:
            del self._sensors[tags]


class ClientRequestQuotaManager(ClientQuotaManager):
    """request_percentage: handling time as a percentage of one second; a throttle never longer than one quota
    window (Kafka bounds this one)."""

    def record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float,
                                        now_ms: float | None = None) -> int:
        throttle = super().record_and_get_throttle_time_ms(user, client_id, value, now_ms)
        return min(throttle, self.config.window_ms)


class RequestHandlerTime(trio.abc.Instrument):
    """Kafka's request handler thread time, on trio: the CPU time of the steps a request's own task runs while
    the request is handled, not of the other tasks that run while it waits (a long poll, an acks=all produce).
    Installed in the broker's event loop the first time a request has a request_percentage quota to answer to,
    so a broker without such quotas pays nothing per task step."""

    def __init__(self) -> None:
        self._spent: weakref.WeakKeyDictionary[trio.lowlevel.Task, float] = weakref.WeakKeyDictionary()
        self._step_started = 0.0
        self._installed = False

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task in self._spent:
            self._step_started = time.thread_time()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task in self._spent:
            self._spent[task] += time.thread_time() - self._step_started

    def start(self) -> None:
        """Count the current task's time from now (it is in a step: that step counts from here)."""
        if not self._installed:
            trio.lowlevel.add_instrument(self)
            self._installed = True
        self._spent[trio.lowlevel.current_task()] = 0.0
        self._step_started = time.thread_time()

    def stop(self) -> float:
        """The current task's time since `start` (0 if it was not started), and no more counting."""
        spent = self._spent.pop(trio.lowlevel.current_task(), None)
        return 0.0 if spent is None else spent + time.thread_time() - self._step_started


@dataclass
class QuotaManagers:
    """The broker's quota managers (Kafka's QuotaFactory.QuotaManagers) over its metadata image's quotas."""

    produce: ClientQuotaManager
    fetch: ClientQuotaManager
    request: ClientRequestQuotaManager
    config: QuotaConfig = field(default_factory=QuotaConfig)
    handler_time: RequestHandlerTime = field(default_factory=RequestHandlerTime)

    @classmethod
    def over(cls, quotas: Callable[[], ClientQuotas], config: QuotaConfig | None = None,
             clock_ms: Callable[[], float] | None = None) -> QuotaManagers:
        config = config or QuotaConfig()
        return cls(ClientQuotaManager(PRODUCER_BYTE_RATE, quotas, config, clock_ms),
                   ClientQuotaManager(CONSUMER_BYTE_RATE, quotas, config, clock_ms),
                   ClientRequestQuotaManager(REQUEST_PERCENTAGE, quotas, config, clock_ms), config)


def handling_time_percent(seconds: float) -> float:
    """Handling time as request_percentage counts it: percent of one second."""
    return seconds * 100

