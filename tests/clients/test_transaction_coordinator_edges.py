"""The transaction coordinator's less trodden answers over the wire, each as Kafka 4.1 gives it: the API versions it
advertises, the per-version error mapping of older clients, the batched AddPartitionsToTxn brokers send, the
transactional offset commit's checks per version, the admin APIs' edges, and the `__transaction_state` topic's
configs."""
from __future__ import annotations

import pytest
from kafka.protocol.admin.configs import DescribeConfigsRequest
from kafka.protocol.admin.transactions import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

from minikafka.broker.coordinator.coordinator_log import partition_for
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode
from tests.helpers import admin_create_topic
from tests.raw_client import RawConnection

TOPIC = "edges"
TOPIC_RESOURCE = 2  # DescribeConfigs' resource type of a topic
DYNAMIC_TOPIC_CONFIG = 1  # the config source of a topic's own override


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


def _describe(conn: RawConnection, transactional_id: str) -> tuple[int, str, int, int, list[tuple[str, int]]]:
    """(error, state, producer id, epoch, partitions) of the id, as DescribeTransactions tells them."""
    [s] = conn.request(DescribeTransactionsRequest[0](transactional_ids=[transactional_id])).transaction_states
    return (s.error_code, s.transaction_state, s.producer_id, s.producer_epoch,
            sorted((t.topic, p) for t in s.topics for p in t.partitions))


def _add_v3(conn: RawConnection, transactional_id: str, producer_id: int, epoch: int, partitions: list[int]) -> None:
    response = conn.request(AddPartitionsToTxnRequest[3](
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=[(TOPIC, partitions)]))
    assert {p.partition_error_code for t in response.results_by_topic_v3_and_below
            for p in t.results_by_partition} == {ErrorCode.NONE}


def test_init_producer_id_before_v4_answers_a_fenced_producer_invalid_producer_epoch(conn):
    """KIP-588: PRODUCER_FENCED came with InitProducerId v4; a v3 client (KIP-360's producer id and epoch) is told
    INVALID_PRODUCER_EPOCH, which it knows as fatal too. Nothing changes for the id."""
    first = _init(conn, "edge-tx")
    before = _describe(conn, "edge-tx")
    for version, error in ((3, ErrorCode.INVALID_PRODUCER_EPOCH), (4, ErrorCode.PRODUCER_FENCED),
                           (5, ErrorCode.PRODUCER_FENCED)):
        fenced = _init(conn, "edge-tx", version, producer_id=first.producer_id + 100, epoch=0)
        assert (fenced.error_code, fenced.producer_id, fenced.producer_epoch) == (error, -1, -1), version
    assert _describe(conn, "edge-tx") == before
    recovered = _init(conn, "edge-tx", 3, producer_id=first.producer_id, epoch=first.producer_epoch)
    assert (recovered.error_code, recovered.producer_id, recovered.producer_epoch) == (
        ErrorCode.NONE, first.producer_id, first.producer_epoch + 1)


def test_add_offsets_to_txn_before_v2_answers_a_fenced_producer_invalid_producer_epoch(conn):
    _init(conn, "edge-tx")
    current = _init(conn, "edge-tx")
    before = _describe(conn, "edge-tx")
    answers = {version: conn.request(AddOffsetsToTxnRequest[version](
        transactional_id="edge-tx", producer_id=current.producer_id, producer_epoch=current.producer_epoch - 1,
        group_id="edges-group")).error_code for version in range(5)}
    assert answers == {0: ErrorCode.INVALID_PRODUCER_EPOCH, 1: ErrorCode.INVALID_PRODUCER_EPOCH,
                       2: ErrorCode.PRODUCER_FENCED, 3: ErrorCode.PRODUCER_FENCED, 4: ErrorCode.PRODUCER_FENCED}
    assert _describe(conn, "edge-tx") == before == (ErrorCode.NONE, "Empty", current.producer_id,
                                                    current.producer_epoch, [])


def _txn_offset_commit(conn: RawConnection, version: int, producer_id: int, epoch: int) -> int:
    R = TxnOffsetCommitRequest[version]
    T = R.TxnOffsetCommitRequestTopic
    response = conn.request(R(
        transactional_id="edge-tx", group_id="edges-group", producer_id=producer_id, producer_epoch=epoch,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=[T(name=TOPIC, partitions=[T.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata="")])]))
    [code] = [p.error_code for t in response.topics for p in t.partitions]
    return code


def test_txn_offset_commit_without_add_offsets_to_txn_per_version(conn):
    """The group coordinator asks the transaction coordinator whether the group's offsets partition is in the
    transaction (KIP-890 part 1): before v4 a commit without AddOffsetsToTxn is INVALID_TXN_STATE, v4 is told
    TRANSACTION_ABORTABLE; v5 (transaction version 2) adds the partition itself."""
    init = _init(conn, "edge-tx")
    _add_v3(conn, "edge-tx", init.producer_id, init.producer_epoch, [0])
    ongoing = (ErrorCode.NONE, "Ongoing", init.producer_id, init.producer_epoch, [(TOPIC, 0)])
    assert _describe(conn, "edge-tx") == ongoing
    assert _txn_offset_commit(conn, 3, init.producer_id, init.producer_epoch) == ErrorCode.INVALID_TXN_STATE
    assert _txn_offset_commit(conn, 4, init.producer_id, init.producer_epoch) == ErrorCode.TRANSACTION_ABORTABLE
    assert _describe(conn, "edge-tx") == ongoing  # nothing was added
    assert _txn_offset_commit(conn, 5, init.producer_id, init.producer_epoch) == ErrorCode.NONE
    assert _describe(conn, "edge-tx")[4] == [("__consumer_offsets", partition_for("edges-group", 50)), (TOPIC, 0)]


def _batched_add(conn: RawConnection, version: int,
                 transactions: list[tuple[str, int, int, bool, dict[str, list[int]]]]
                 ) -> tuple[int, dict[str, dict[tuple[str, int], int]]]:
    """AddPartitionsToTxn v4+ as a partition leader sends it: (top-level error, per transactional id the error of
    each partition)."""
    R = AddPartitionsToTxnRequest[version]
    response = conn.request(R(transactions=[R.AddPartitionsToTxnTransaction(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, verify_only=verify_only,
        topics=[R.AddPartitionsToTxnTopic(name=name, partitions=ps) for name, ps in topics.items()])
        for txn_id, pid, epoch, verify_only, topics in transactions]))
    return response.error_code, {r.transactional_id: {(t.name, p.partition_index): p.partition_error_code
                                                      for t in r.topic_results for p in t.results_by_partition}
                                 for r in response.results_by_transaction}


@pytest.mark.parametrize("version", [4, 5])
def test_batched_add_partitions_to_txn_answers_each_transaction(conn, version):
    """The brokers' form (KIP-890 part 1): several transactional ids in one request, each verified (verify_only:
    nothing is added, a partition outside the transaction is TRANSACTION_ABORTABLE) or added (a transaction
    version 2 add), each answered on its own."""
    verified, added, refused, fenced = (_init(conn, name) for name in ("verified-tx", "added-tx", "refused-tx",
                                                                         "fenced-tx"))
    _add_v3(conn, "verified-tx", verified.producer_id, verified.producer_epoch, [0])
    error, results = _batched_add(conn, version, [
        ("verified-tx", verified.producer_id, verified.producer_epoch, True, {TOPIC: [0, 1]}),
        ("added-tx", added.producer_id, added.producer_epoch, False, {TOPIC: [1]}),
        ("refused-tx", refused.producer_id, refused.producer_epoch, False, {TOPIC: [0], "no-such-topic": [0]}),
        ("fenced-tx", fenced.producer_id, fenced.producer_epoch + 5, True, {TOPIC: [0]}),
        ("unknown-tx", verified.producer_id, 0, True, {TOPIC: [0]})])
    assert error == ErrorCode.NONE
    assert results == {
        "verified-tx": {(TOPIC, 0): ErrorCode.NONE, (TOPIC, 1): ErrorCode.TRANSACTION_ABORTABLE},
        "added-tx": {(TOPIC, 1): ErrorCode.NONE},
        "refused-tx": {(TOPIC, 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
                       ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION},
        "fenced-tx": {(TOPIC, 0): ErrorCode.PRODUCER_FENCED},
        "unknown-tx": {(TOPIC, 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}}
    assert _describe(conn, "verified-tx")[1:] == ("Ongoing", verified.producer_id, 0, [(TOPIC, 0)])
    assert _describe(conn, "added-tx")[1:] == ("Ongoing", added.producer_id, 0, [(TOPIC, 1)])
    assert _describe(conn, "refused-tx")[1:] == ("Empty", refused.producer_id, 0, [])
    assert _describe(conn, "fenced-tx")[1:] == ("Empty", fenced.producer_id, 0, [])
    assert _describe(conn, "unknown-tx")[0] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def topic_configs(bootstrap: str, topic: str) -> dict[str, tuple[str, int]]:
    """Every config of the topic: (value, config source), as the first broker of `bootstrap` describes them."""
    R = DescribeConfigsRequest[4]
    with RawConnection(bootstrap.split(",")[0]) as conn:
        response = conn.request(R(resources=[R.DescribeConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=topic, configuration_keys=None)],
            include_synonyms=False, include_documentation=False))
    (result,) = response.results
    assert result.error_code == ErrorCode.NONE, result
    return {c.name: (c.value, c.config_source) for c in result.configs}


def test_the_transaction_state_topic_is_created_with_kafkas_configs(broker_factory):
    """As Kafka's TransactionStateManager creates it: compacted, uncompressed, no unclean election, min.insync.replicas
    and segment.bytes from transaction.state.log.*; all topic overrides. (One broker: the replication factor and
    min.insync.replicas are capped at the one live broker, so a single broker serves transactions.)"""
    broker = broker_factory(transaction_state_log_segment_bytes=10 * 1024 * 1024)
    with RawConnection(broker.bootstrap_servers) as conn:
        assert _init(conn, "edge-tx").error_code == ErrorCode.NONE
    configs = topic_configs(broker.bootstrap_servers, "__transaction_state")
    overrides = {name: value for name, (value, source) in configs.items()
                 if source == DYNAMIC_TOPIC_CONFIG}
    assert overrides == {"cleanup.policy": "compact", "compression.type": "uncompressed",
                         "min.insync.replicas": "1", "segment.bytes": str(10 * 1024 * 1024),
                         "unclean.leader.election.enable": "false"}
