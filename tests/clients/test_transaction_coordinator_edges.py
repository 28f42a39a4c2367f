"""The transaction coordinator's less trodden answers over the wire, each as Kafka 4.1 gives it: the API versions it
advertises, the per-version error mapping of older clients, the batched AddPartitionsToTxn brokers send, the
transactional offset commit's checks per version, the admin APIs' edges, and the `__transaction_state` topic's
configs."""
from __future__ import annotations

import pytest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest

from minikafka.protocol.api_keys import ApiKey
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
