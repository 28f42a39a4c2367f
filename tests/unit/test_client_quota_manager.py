"""Client quotas without a broker: Kafka's Rate and throttle time, quota precedence, the controller's validation
of AlterClientQuotas, DescribeClientQuotas filters, the image's replay and the ZooKeeper entity paths."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import trio

from minikafka.broker.controller.client_quota_control import (
    ClientQuotaAlteration,
    ClientQuotaOp,
    alter_client_quotas,
)
from minikafka.broker.metadata.client_quota_entity import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    entity_of_zk_path,
    quota_config,
    quota_entity,
    quota_values,
    zk_entity_path,
)
from minikafka.broker.metadata.metadata_image import MetadataImage
from minikafka.broker.server.client_quota_manager import (
    ClientQuotaManager,
    ClientRequestQuotaManager,
    QuotaConfig,
    Rate,
    RequestHandlerTime,
    client_throttles,
    resolve_quota,
)
from minikafka.broker.server.handlers.client_quotas import describe_client_quotas
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.metadata_records import ClientQuotaRecord

CONFIG = QuotaConfig()  # 11 samples of 1 s


def manager(quotas: dict, key: str = PRODUCER_BYTE_RATE) -> ClientQuotaManager:
    return ClientQuotaManager(key, lambda: quotas, CONFIG, clock_ms=lambda: 0.0)


# ---- Rate and throttle time -------------------------------------------------------------------------------------

def test_a_rate_is_never_measured_over_less_than_all_but_one_window():
    rate = Rate(CONFIG)
    rate.record(1000, 0)
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(100.0)
    assert rate.window_size_ms(2_500) == 10_500  # two full windows and a half: still ten at least, plus the half
    rate.record(1000, 10_500)
    assert rate.window_size_ms(10_500) == 10_500  # the first sample is still within 11 windows of its last event
    assert rate.measure(10_500) == pytest.approx(2000 / 10.5)
    assert rate.measure(11_000) == pytest.approx(1000 / 10.5)  # now it is not: only the second counts


def test_samples_idle_for_the_whole_span_are_forgotten():
    rate = Rate(CONFIG)
    rate.record(5000, 0)
    assert rate.measure(11_000) == 0.0
    rate.record(100, 11_000)
    assert rate.measure(11_000) == pytest.approx(10.0)


def test_throttle_time_brings_the_rate_back_to_the_quota_over_the_window():
    quotas = {quota_entity([("client-id", "c")]): {PRODUCER_BYTE_RATE: 100.0}}
    m = manager(quotas)
    assert m.record_and_get_throttle_time_ms("ANONYMOUS", "c", 1000, now_ms=0) == 0  # 100/s: at the quota
    # 3000 over a 10 s span is 300/s: (300 - 100) / 100 * 10 s.
    assert m.record_and_get_throttle_time_ms("ANONYMOUS", "c", 2000, now_ms=0) == 20_000
    m.unrecord("ANONYMOUS", "c", 2000, now_ms=0)
    assert m.record_and_get_throttle_time_ms("ANONYMOUS", "c", 0, now_ms=0) == 0
    assert m.record_and_get_throttle_time_ms("ANONYMOUS", "other", 10**9, now_ms=0) == 0  # no quota: never


def test_a_request_quota_throttles_for_at_most_one_window():
    quotas = {quota_entity([("user", None)]): {REQUEST_PERCENTAGE: 1.0}}
    m = ClientRequestQuotaManager(REQUEST_PERCENTAGE, lambda: quotas, CONFIG, clock_ms=lambda: 0.0)
    assert m.record_and_get_throttle_time_ms("ANONYMOUS", "c", 500.0, now_ms=0) == CONFIG.window_ms


def test_a_fetch_asks_for_no_more_than_the_quota_could_let_through():
    quotas = {quota_entity([("client-id", None)]): {CONSUMER_BYTE_RATE: 1000.0}}
    m = manager(quotas, CONSUMER_BYTE_RATE)
    assert m.max_value_in_quota_window("ANONYMOUS", "any") == 10_000
    assert m.max_value_in_quota_window("ANONYMOUS", "any") == 10_000
    assert manager({}, CONSUMER_BYTE_RATE).max_value_in_quota_window("ANONYMOUS", "c") == float("inf")


# ---- precedence ---------------------------------------------------------------------------------------------------

PRECEDENCE = [
    ([("user", "u"), ("client-id", "c")], ("u", "c")),
    ([("user", "u"), ("client-id", None)], ("u", "c")),
    ([("user", "u")], ("u", "")),
    ([("user", None), ("client-id", "c")], ("u", "c")),
    ([("user", None), ("client-id", None)], ("u", "c")),
    ([("user", None)], ("u", "")),
    ([("client-id", "c")], ("", "c")),
    ([("client-id", None)], ("", "c")),
]


def test_the_most_specific_entity_with_the_key_decides():
    quotas = {quota_entity(entity): {PRODUCER_BYTE_RATE: float(i + 1)} for i, (entity, _) in enumerate(PRECEDENCE)}
    quotas[quota_entity([("user", "u"), ("client-id", "c")])] = {CONSUMER_BYTE_RATE: 99.0}  # another key only
    for i, (entity, tags) in enumerate(PRECEDENCE):
        if i == 0:
            continue
        assert resolve_quota(quotas, PRODUCER_BYTE_RATE, "u", "c") == (tags, float(i + 1)), entity
        del quotas[quota_entity(entity)]
    assert resolve_quota(quotas, PRODUCER_BYTE_RATE, "u", "c") is None
    assert resolve_quota(quotas, CONSUMER_BYTE_RATE, "u", "c") == (("u", "c"), 99.0)


def test_a_user_quota_is_shared_by_the_users_clients_and_a_client_quota_by_its_users():
    quotas = {quota_entity([("user", None)]): {PRODUCER_BYTE_RATE: 100.0}}
    m = manager(quotas)
    assert m.record_and_get_throttle_time_ms("alice", "one", 1000, now_ms=0) == 0
    assert m.record_and_get_throttle_time_ms("alice", "two", 1000, now_ms=0) > 0  # alice's clients together
    assert m.record_and_get_throttle_time_ms("bob", "one", 1000, now_ms=0) == 0  # the default: each user its own


# ---- KIP-219 ------------------------------------------------------------------------------------------------------

def test_which_clients_back_off_by_themselves():
    assert not client_throttles(ApiKey.PRODUCE, 5)
    assert client_throttles(ApiKey.PRODUCE, 6)
    assert not client_throttles(ApiKey.FETCH, 7)
    assert client_throttles(ApiKey.FETCH, 8)
    assert not client_throttles(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1)


# ---- the controller's validation ----------------------------------------------------------------------------------

def alteration(entity: list, *ops: tuple[str, float, bool]) -> ClientQuotaAlteration:
    return ClientQuotaAlteration(entity, [ClientQuotaOp(*op) for op in ops])


def outcome(quotas: dict, *alterations: ClientQuotaAlteration) -> tuple[list, list[tuple[ErrorCode, str] | None]]:
    records, errors = alter_client_quotas(quotas, alterations)
    return records, [None if e is None else (e.code, e.message) for e in errors]


@pytest.mark.parametrize(("entity", "op", "message"), [
    ([], (PRODUCER_BYTE_RATE, 1.0, False), "Invalid empty client quota entity"),
    ([("user", "a"), ("user", "b")], (PRODUCER_BYTE_RATE, 1.0, False),
     "Invalid client quota entity, duplicate entity entry user"),
    ([("group", "g")], (PRODUCER_BYTE_RATE, 1.0, False), "Unhandled client quota entity type: group"),
    ([("client-id", "")], (PRODUCER_BYTE_RATE, 1.0, False), "Empty client-id not supported"),
    ([("user", "a")], ("nope", 1.0, False), "Invalid configuration key nope"),
    ([("user", "a")], (PRODUCER_BYTE_RATE, 0.0, False), "Quota producer_byte_rate must be greater than 0"),
    ([("user", "a")], (CONSUMER_BYTE_RATE, 2.5, False), "consumer_byte_rate cannot be a fractional value."),
    ([("user", "a")], (CONSUMER_BYTE_RATE, 1e19, False),
     "Proposed value for consumer_byte_rate is too large for a LONG."),
    ([("ip", "127.0.0.1"), ("client-id", "c")], ("connection_creation_rate", 1.0, False),
     "Invalid quota entity combination, IP entity should not be combined with User or ClientId"),
    ([("ip", None)], (PRODUCER_BYTE_RATE, 1.0, False), "Invalid configuration key producer_byte_rate"),
])
def test_invalid_entries_are_refused_one_by_one(entity, op, message):
    records, errors = outcome({}, alteration(entity, op),
                              alteration([("user", "ok")], (PRODUCER_BYTE_RATE, 5.0, False)))
    assert errors == [(ErrorCode.INVALID_REQUEST, message), None]
    assert [(r.key, r.value) for r in records] == [(PRODUCER_BYTE_RATE, 5.0)]


def test_duplicates_within_a_request_are_refused():
    _, errors = outcome({}, alteration([("user", "a")], (PRODUCER_BYTE_RATE, 1.0, False)),
                        alteration([("user", "a")], (CONSUMER_BYTE_RATE, 1.0, False)))
    assert errors == [(ErrorCode.INVALID_REQUEST, "Ignoring duplicate entity {user=a}")] * 2
    _, errors = outcome({}, alteration([("user", "a")], (PRODUCER_BYTE_RATE, 1.0, False),
                                       (PRODUCER_BYTE_RATE, 2.0, False)))
    assert errors == [(ErrorCode.INVALID_REQUEST,
                       "Duplicate quota key producer_byte_rate not updating quota for this entity {user=a}")]


def test_only_changes_are_written():
    entity = quota_entity([("user", "a"), ("client-id", None)])
    quotas = {entity: {PRODUCER_BYTE_RATE: 10.0, REQUEST_PERCENTAGE: 5.5}}
    records, errors = outcome(quotas, alteration([("client-id", None), ("user", "a")],
                                                 (PRODUCER_BYTE_RATE, 10.0, False), (REQUEST_PERCENTAGE, 0.0, True),
                                                 (CONSUMER_BYTE_RATE, 0.0, True), (CONSUMER_BYTE_RATE, 7.0, False)))
    assert errors == [(ErrorCode.INVALID_REQUEST,
                       "Duplicate quota key consumer_byte_rate not updating quota for this entity "
                       "{client-id=<default>, user=a}")]
    records, errors = outcome(quotas, alteration([("client-id", None), ("user", "a")],
                                                 (PRODUCER_BYTE_RATE, 10.0, False), (REQUEST_PERCENTAGE, 0.0, True),
                                                 (CONSUMER_BYTE_RATE, 0.0, True)))
    assert errors == [None]
    assert [(r.key, r.remove) for r in records] == [(REQUEST_PERCENTAGE, True)]


# ---- the image and DescribeClientQuotas ----------------------------------------------------------------------------

def record(entity: list, key: str, value: float, remove: bool = False) -> ClientQuotaRecord:
    return ClientQuotaRecord(entity=[ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                             key=key, value=value, remove=remove)


def test_the_image_replays_quotas_by_entity():
    image = MetadataImage()
    image.replay(record([("user", "a"), ("client-id", "c")], PRODUCER_BYTE_RATE, 5.0), 0)
    image.replay(record([("client-id", "c"), ("user", "a")], CONSUMER_BYTE_RATE, 6.0), 1)
    key = quota_entity([("user", "a"), ("client-id", "c")])
    assert image.client_quotas == {key: {PRODUCER_BYTE_RATE: 5.0, CONSUMER_BYTE_RATE: 6.0}}
    image.replay(record([("user", "a"), ("client-id", "c")], PRODUCER_BYTE_RATE, 0.0, remove=True), 2)
    image.replay(record([("user", "a"), ("client-id", "c")], CONSUMER_BYTE_RATE, 0.0, remove=True), 3)
    assert image.client_quotas == {}


def component(entity_type: str, match_type: int, match: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(entity_type=entity_type, match_type=match_type, match=match)


def test_describe_filters():
    quotas = {quota_entity(e): {PRODUCER_BYTE_RATE: 1.0} for e in (
        [("user", "a")], [("user", None)], [("user", "a"), ("client-id", "c")], [("client-id", "c")])}

    def found(components: list, strict: bool = False) -> set:
        return {entity for entity, _ in describe_client_quotas(quotas, components, strict)}

    user_a, default_user = (("user", "a"),), (("user", None),)
    user_a_client_c, client_c = (("client-id", "c"), ("user", "a")), (("client-id", "c"),)
    assert found([component("user", 0, "a")]) == {user_a, user_a_client_c}
    assert found([component("user", 0, "a")], strict=True) == {user_a}
    assert found([component("user", 1)]) == {default_user}
    assert found([component("user", 2)], strict=True) == {default_user, user_a}
    assert found([component("client-id", 2)]) == {client_c, user_a_client_c}
    assert len(found([])) == 4 and found([], strict=True) == set()
    for bad, code in [([component("user", 0)], ErrorCode.INVALID_REQUEST),
                      ([component("user", 1, "x")], ErrorCode.INVALID_REQUEST),
                      ([component("user", 2, "x")], ErrorCode.INVALID_REQUEST),
                      ([component("user", 3)], ErrorCode.INVALID_REQUEST),
                      ([component("user", 2), component("user", 1)], ErrorCode.INVALID_REQUEST),
                      ([component("", 2)], ErrorCode.INVALID_REQUEST),
                      ([component("ip", 2), component("client-id", 2)], ErrorCode.INVALID_REQUEST),
                      ([component("group", 2)], ErrorCode.UNSUPPORTED_VERSION)]:
        with pytest.raises(KafkaError) as refused:
            describe_client_quotas(quotas, bad, False)
        assert refused.value.code == code


# ---- ZooKeeper ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("entity", "path"), [
    ([("user", "alice")], "users/alice"),
    ([("user", None)], "users/<default>"),
    ([("client-id", "my app*")], "clients/my%20app%2A"),
    ([("user", "a/b"), ("client-id", None)], "users/a%2Fb/clients/<default>"),
    ([("ip", "10.0.0.1")], "ips/10.0.0.1"),
])
def test_entities_have_kafkas_zookeeper_paths(entity, path):
    assert zk_entity_path(quota_entity(entity)) == path
    assert entity_of_zk_path(path) == quota_entity(entity)


def test_zookeeper_configs_hold_quotas_as_kafka_writes_them():
    assert quota_config({PRODUCER_BYTE_RATE: 1e6, REQUEST_PERCENTAGE: 12.5}) == {
        PRODUCER_BYTE_RATE: "1000000", REQUEST_PERCENTAGE: "12.5"}
    assert quota_values({PRODUCER_BYTE_RATE: "1000000", "SCRAM-SHA-256": "x", CONSUMER_BYTE_RATE: "bad"}) == {
        PRODUCER_BYTE_RATE: 1e6}
    assert entity_of_zk_path("topics/t") is None


# ---- handler time -------------------------------------------------------------------------------------------------

def spin(cpu_seconds: float) -> None:
    """Use this much CPU time (not wall time: what a loaded machine does to wall time does not matter)."""
    until = time.thread_time() + cpu_seconds
    while time.thread_time() < until:
        pass


def test_handler_time_counts_the_requests_own_steps_not_the_tasks_run_while_it_waits():
    handler_time = RequestHandlerTime()
    spent: list[float] = []

    async def handle(others_ran: trio.Event) -> None:
        handler_time.start()
        spin(0.05)
        await others_ran.wait()  # another task's 0.2 s of CPU runs meanwhile
        spent.append(handler_time.stop())

    async def other(others_ran: trio.Event) -> None:
        spin(0.2)
        others_ran.set()

    async def main() -> None:
        others_ran = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(handle, others_ran)
            nursery.start_soon(other, others_ran)

    trio.run(main)
    assert 0.05 <= spent[0] < 0.15
