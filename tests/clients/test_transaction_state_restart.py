"""A broker's transaction state after kill -9, as Kafka's coordinator and partition leaders keep it.

- A restarted broker loads a large `__transaction_state` partition while it serves, as Kafka's coordinator does: the
  transactional ids on it answer COORDINATOR_LOAD_IN_PROGRESS until the load is done, real clients retry that, and
  after the load every id has the state it had before the restart.
- Open transactions survive a kill -9 of the broker that coordinates them and leads their partitions: the coordinator
  describes them as before (state, partitions, producer id and epoch, timeout, start time), the partitions describe
  their producers and last stable offsets as before, and their producers then commit one and abort the other.
"""
from __future__ import annotations

import struct
import threading
import time
from contextlib import suppress

from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.errors import KafkaError
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.producer.transaction import InitProducerIdRequest

from minikafka.protocol.codec import SCHEMAS
from minikafka.protocol.errors import ErrorCode
from tests.helpers import (
    admin_create_topic,
    last_stable_offsets,
    producer_states,
    read_committed_values,
    read_values,
    wait_until,
)
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


OPEN_TOPIC = "tx-open-at-kill"
OPEN_PARTITIONS = 3


def transactional_producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(LOAD_WAIT_S)
    return producer


def write(producer: Producer, values: dict[bytes, int]) -> None:
    """Begin a transaction and write each value to its partition; the records are acknowledged on return."""
    producer.begin_transaction()
    for value, partition in values.items():
        producer.produce(OPEN_TOPIC, value=value, partition=partition)
    assert producer.flush(LOAD_WAIT_S) == 0


def listed_transactions(bootstrap: str) -> list[tuple[str, int, str]]:
    """ListTransactions as an admin client sees it: (transactional id, producer id, state), sorted."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return sorted((t.transactional_id, t.producer_id, t.state.value)
                      for listed in admin.list_transactions().values() for t in listed)
    finally:
        admin.close()


def test_open_transactions_survive_a_kill_9_of_their_coordinator_and_end_as_their_producers_decide(broker):
    bootstrap = broker.bootstrap_servers
    admin_create_topic(bootstrap, OPEN_TOPIC, OPEN_PARTITIONS)
    kept = transactional_producer(bootstrap, "kept-open")
    dropped = transactional_producer(bootstrap, "dropped-open")
    write(kept, {b"before-0": 0, b"before-1": 1})
    kept.commit_transaction(LOAD_WAIT_S)
    write(dropped, {b"aborted-before-2": 2})
    dropped.abort_transaction(LOAD_WAIT_S)
    write(kept, {b"kept-0": 0, b"kept-1": 1})  # open across the kill, committed after it
    write(dropped, {b"dropped-1": 1, b"dropped-2": 2})  # open across the kill, aborted after it

    listed = listed_transactions(bootstrap)
    described = broker.state.transactions()
    producers = producer_states(bootstrap, OPEN_TOPIC, OPEN_PARTITIONS)
    stable = last_stable_offsets(bootstrap, OPEN_TOPIC, OPEN_PARTITIONS)
    assert [(t.transactional_id, t.state, t.partitions) for t in described] == [
        ("dropped-open", "Ongoing", [(OPEN_TOPIC, 1), (OPEN_TOPIC, 2)]),
        ("kept-open", "Ongoing", [(OPEN_TOPIC, 0), (OPEN_TOPIC, 1)])]
    # Each partition's LSO is the first offset of its oldest open transaction: each holds a record and its marker
    # from the two ended transactions (the committed one on 0 and 1, the aborted one on 2), then the open ones.
    assert stable == {0: 2, 1: 2, 2: 2}
    assert all(any(start >= 0 for *_, start in producers[p]) for p in range(OPEN_PARTITIONS))

    broker.kill()
    broker.start()
    # Until it leads its `__transaction_state` partitions again and has loaded them, the broker lists fewer
    # transactions (or answers COORDINATOR_LOAD_IN_PROGRESS), as Kafka's does; and until it leads the topic's
    # partitions, it refuses their requests. Then everything is as before the kill.
    relisted: list[list[tuple[str, int, str]]] = []

    def listing_again() -> bool:
        with suppress(KafkaError):
            relisted.append(listed_transactions(bootstrap))
        return relisted[-1:] == [listed]

    with suppress(TimeoutError):
        wait_until(listing_again, timeout=LOAD_WAIT_S, message="ListTransactions to list what it did before")
    assert relisted[-1:] == [listed]
    wait_until(lambda: all(broker.state.partition(OPEN_TOPIC, p).high_watermark is not None
                           for p in range(OPEN_PARTITIONS)), timeout=LOAD_WAIT_S, message="the partitions' leader")
    assert broker.state.transactions() == described  # state, partitions, producer id and epoch, timeout, start time
    assert producer_states(bootstrap, OPEN_TOPIC, OPEN_PARTITIONS) == producers
    assert last_stable_offsets(bootstrap, OPEN_TOPIC, OPEN_PARTITIONS) == stable

    kept.commit_transaction(LOAD_WAIT_S)
    dropped.abort_transaction(LOAD_WAIT_S)
    wait_until(lambda: {t.transactional_id: t.state for t in broker.state.transactions()} == {
        "dropped-open": "CompleteAbort", "kept-open": "CompleteCommit"}, timeout=LOAD_WAIT_S,
        message="both transactions to complete")
    ends = {p: broker.state.partition(OPEN_TOPIC, p).high_watermark for p in range(OPEN_PARTITIONS)}
    assert last_stable_offsets(bootstrap, OPEN_TOPIC, OPEN_PARTITIONS) == ends
    after = producer_states(bootstrap, OPEN_TOPIC, OPEN_PARTITIONS)
    assert all(start == -1 for p in range(OPEN_PARTITIONS) for *_, start in after[p])
    committed = [b"before-0", b"before-1", b"kept-0", b"kept-1"]
    assert sorted(read_committed_values(bootstrap, OPEN_TOPIC, OPEN_PARTITIONS, len(committed), LOAD_WAIT_S)) == \
        sorted(committed)
    everything = [*committed, b"aborted-before-2", b"dropped-1", b"dropped-2"]
    assert sorted(read_values("confluent-kafka", bootstrap, OPEN_TOPIC, OPEN_PARTITIONS, "read_uncommitted",
                              len(everything), LOAD_WAIT_S)) == sorted(everything)
