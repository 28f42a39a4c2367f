"""The transaction coordinator's less trodden answers over the wire, each as Kafka 4.1 gives it: the API versions it
advertises, the per-version error mapping of older clients, the batched AddPartitionsToTxn brokers send, the
transactional offset commit's checks per version, the admin APIs' edges, and the `__transaction_state` topic's
configs."""
from __future__ import annotations

import pytest
from kafka.protocol.admin.transactions import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode
from tests.helpers import admin_create_topic
from tests.raw_client import RawConnection

TOPIC = "edges"


@pytest.fixture
def conn(broker):
    admin_create_topic(broker.bootstrap_servers, TOPIC, 2)
    with RawConnection(broker.bootstrap_servers) as c:
        c.find_coordinator("edges-group")  # creates __consumer_offsets
        yield c


def test_the_transaction_apis_are_advertised_as_kafka_4_1_advertises(conn):
    """InitProducerId v6 (two-phase commit) is unstable in Kafka 4.1 and WriteTxnMarkers v2 is Kafka 4.2's: a client
    that picks the highest version both sides know must not pick them."""
    response = conn.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert {key.name: advertised[key] for key in (
        ApiKey.FIND_COORDINATOR, ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN,
        ApiKey.END_TXN, ApiKey.WRITE_TXN_MARKERS, ApiKey.TXN_OFFSET_COMMIT, ApiKey.DESCRIBE_PRODUCERS,
        ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS)} == {
        "FIND_COORDINATOR": (0, 6), "INIT_PRODUCER_ID": (0, 5), "ADD_PARTITIONS_TO_TXN": (0, 5),
        "ADD_OFFSETS_TO_TXN": (0, 4), "END_TXN": (0, 5), "WRITE_TXN_MARKERS": (1, 1), "TXN_OFFSET_COMMIT": (0, 5),
        "DESCRIBE_PRODUCERS": (0, 0), "DESCRIBE_TRANSACTIONS": (0, 0), "LIST_TRANSACTIONS": (0, 2)}


def _init(conn: RawConnection, transactional_id: str, version: int = 4, producer_id: int = -1, epoch: int = -1):
    return conn.request(InitProducerIdRequest[version](transactional_id=transactional_id,
                                                       transaction_timeout_ms=60000, producer_id=producer_id,
                                                       producer_epoch=epoch))


def test_describe_transactions_errors_leave_the_other_fields_at_kafkas_defaults(conn):
    assert _init(conn, "edge-tx").error_code == ErrorCode.NONE  # `__transaction_state` exists from here on
    response = conn.request(DescribeTransactionsRequest[0](transactional_ids=["never-seen", ""]))
    assert [(s.transactional_id, s.error_code, s.transaction_state, s.transaction_timeout_ms,
             s.transaction_start_time_ms, s.producer_id, s.producer_epoch, list(s.topics))
            for s in response.transaction_states] == [
        ("never-seen", ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, "", 0, 0, 0, 0, []),
        ("", ErrorCode.INVALID_REQUEST, "", 0, 0, 0, 0, [])]


# A ListTransactions pattern and the ids it lists; None: refused with INVALID_REGULAR_EXPRESSION.
PATTERNS: dict[str, list[str] | None] = {
    "edge-.*": ["edge-tx"], "(?i)EDGE-TX": ["edge-tx"], "edge": [], "[(?=]dge-tx": [],
    "edge(?=-tx)-tx": None, "(?<!x)edge-tx": None, "(e)dg\\1-tx": None, "(?P<e>e)dg(?P=e)-tx": None,
    "(?>edge)-tx": None, "edge-tx*+": None, "(e)?(?(1)dge|x)-tx": None, "edge-[": None}


def test_list_transactions_matches_ids_as_re2_does(conn):
    """Kafka matches the pattern with RE2J: what Python's `re` has beyond RE2 (lookarounds, backreferences, atomic
    groups, possessive quantifiers, conditionals) is refused with INVALID_REGULAR_EXPRESSION, as a pattern that
    does not compile is; a pattern must match the whole id."""
    assert _init(conn, "edge-tx").error_code == ErrorCode.NONE
    answers = {}
    for pattern in PATTERNS:
        response = conn.request(ListTransactionsRequest[2](state_filters=[], producer_id_filters=[],
                                                           duration_filter=-1, transactional_id_pattern=pattern))
        answers[pattern] = ([t.transactional_id for t in response.transaction_states]
                            if response.error_code == ErrorCode.NONE else
                            None if response.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION and
                            not response.transaction_states else (response.error_code, response.transaction_states))
    assert answers == PATTERNS
