"""Transactions are not served: a transactional producer is told so at once, not after max.block.ms."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException, Producer


def test_transactional_producer_fails_fast_and_the_broker_says_why(broker):
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "tx-1"})
    try:
        started = time.monotonic()
        with pytest.raises(KafkaException) as raised:
            producer.init_transactions(30)
        assert time.monotonic() - started < 15
    finally:
        # The raised exception's traceback holds this frame: without the del, the producer (its threads and its
        # connection) would live until a garbage collection, past the broker's end.
        del producer
    assert raised.value.args[0].name() == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    assert "transactions are not supported" in broker.log_path.read_text()
