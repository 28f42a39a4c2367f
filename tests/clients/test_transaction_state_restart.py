"""A restarted broker loads a large `__transaction_state` partition while it serves, as Kafka's coordinator does: the
transactional ids on it answer COORDINATOR_LOAD_IN_PROGRESS until the load is done, real clients retry that, and
after the load every id has the state it had before the restart."""
from __future__ import annotations

import struct
import threading
import time

from confluent_kafka import Producer
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.producer.transaction import InitProducerIdRequest

from minikafka.protocol.codec import SCHEMAS
from minikafka.protocol.errors import ErrorCode
from tests.helpers import admin_create_topic, read_committed_values
from tests.raw_client import RawConnection

TOPIC = "tx-after-restart"
# Enough ids that their load takes a few hundred milliseconds in Python: the first requests after the restart come
# while it runs.
IDS = 6000
PIPELINED = 1000
LOAD_WAIT_S = 30


def init_producer_id(transactional_id: str) -> ApiMessage:
    return InitProducerIdRequest[4](transactional_id=transactional_id, transaction_timeout_ms=60000, producer_id=-1,
                                    producer_epoch=-1)


def next_answer(conn: RawConnection, request: ApiMessage) -> ApiMessage:
    """The response to `request`, the oldest one sent on `conn` and not yet read."""
    frame = conn.read_frame()
    assert frame is not None, "broker closed the connection"
    schema = SCHEMAS[request.API_KEY]
    position = struct.calcsize(">i") + schema.response_header_version(request.API_VERSION)
    return schema.response.decode(frame[position:], version=request.API_VERSION)


def commit_one(bootstrap: str, transactional_id: str, value: bytes, done: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(LOAD_WAIT_S)
    producer.begin_transaction()
    producer.produce(TOPIC, value=value, partition=0)
    producer.commit_transaction(LOAD_WAIT_S)
    done.append(transactional_id)


def test_clients_retry_coordinator_load_in_progress_while_a_large_partition_loads_after_a_restart(broker_factory):
    broker = broker_factory(transaction_state_log_num_partitions=1)  # every transactional id on one partition
    admin_create_topic(broker.bootstrap_servers, TOPIC, 1)
    with RawConnection(broker.bootstrap_servers, timeout=60) as conn:
        assert conn.request(init_producer_id("tx-0")).error_code == ErrorCode.NONE  # creates __transaction_state
        for start in range(1, IDS, PIPELINED):
            requests = [init_producer_id(f"tx-{i}") for i in range(start, min(IDS, start + PIPELINED))]
            for request in requests:
                conn.send(request)
            assert {next_answer(conn, request).error_code for request in requests} == {ErrorCode.NONE}

    broker.kill()
    broker.start()
    done: list[str] = []
    client = threading.Thread(target=commit_one, args=(broker.bootstrap_servers, "tx-1", b"after-restart", done))
    client.start()
    answers = []
    try:
        with RawConnection(broker.bootstrap_servers, timeout=60) as conn:
            deadline = time.monotonic() + LOAD_WAIT_S
            while True:
                answer = conn.request(init_producer_id("tx-2"))
                answers.append(answer.error_code)
                if answer.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                    break
                time.sleep(0.02)
    finally:
        client.join(LOAD_WAIT_S * 2)

    assert answers[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # the broker served while the partition loaded
    assert answers[-1] == ErrorCode.NONE and answer.producer_epoch == 1  # loaded: the epoch from before, bumped
    assert done == ["tx-1"]  # the Java-like client retried through the load
    assert read_committed_values(broker.bootstrap_servers, TOPIC, 1, 1, LOAD_WAIT_S) == [b"after-restart"]
    assert broker.state.transaction(f"tx-{IDS - 1}").producer_epoch == 0  # every id is back
