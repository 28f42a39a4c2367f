"""`minikafka produce --transactional-id` on an input that stays open, and `minikafka transactions
describe-producers`, through the CLI against real brokers."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.helpers import wait_until
from tests.integration.test_cli import CLI_TIMEOUT_S, cli, kafka_table, wait_for_transaction

# Generous: a commit is a few round trips, but the machine may be loaded.
VISIBLE_WITHIN_S = 60.0


def committed_values(broker, topic: str) -> list[bytes]:
    return [r.value for r in broker.state.records(topic, isolation_level="read_committed")]


# ---- produce on a pipe kept open -----------------------------------------------------------------------------------

def test_a_pipe_kept_open_commits_each_batch_of_input_as_it_comes(minikafka_session_broker):
    broker = minikafka_session_broker
    topic = "cli-tx-stream"
    cli(broker, "topics", "create", "--topic", topic)
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "produce", "-t", topic, "--transactional-id",
                             "cli-streamer", "--progress", "--bootstrap-server", broker.bootstrap_servers],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"a\nb\n")
        proc.stdin.flush()
        # Nothing more comes yet, and the input is not closed: what came is committed all the same.
        wait_until(lambda: committed_values(broker, topic) == [b"a", b"b"], timeout=VISIBLE_WITHIN_S,
                   message="read_committed readers to see a and b while stdin stays open")
        assert proc.poll() is None
        state = broker.state.partition(topic, 0)
        assert state.last_stable_offset == state.high_watermark == 3  # after the commit marker
        proc.stdin.write(b"c\n")
        proc.stdin.flush()
        wait_until(lambda: committed_values(broker, topic) == [b"a", b"b", b"c"], timeout=VISIBLE_WITHIN_S,
                   message="read_committed readers to see c while stdin stays open")
        _, stderr = proc.communicate(timeout=CLI_TIMEOUT_S)  # closes stdin: the end of the input
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=CLI_TIMEOUT_S)
    assert proc.returncode == 0, stderr
    assert stderr.decode().splitlines()[-1] == f"% Produced 3 messages to {topic} in 2 transaction(s)"
    wait_for_transaction(broker, "cli-streamer", "CompleteCommit")


def test_a_file_is_one_transaction_unless_the_transaction_size_bounds_it(minikafka_session_broker, tmp_path: Path):
    broker = minikafka_session_broker
    topic = "cli-tx-file"
    cli(broker, "topics", "create", "--topic", topic)
    lines = tmp_path / "lines.txt"
    lines.write_bytes(b"".join(b"m%d\n" % i for i in range(7)))
    whole = cli(broker, "produce", "-t", topic, "--transactional-id", "cli-file", "--progress", "--file", str(lines))
    assert whole.stderr.decode().splitlines()[-1] == f"% Produced 7 messages to {topic} in 1 transaction(s)"
    bounded = cli(broker, "produce", "-t", topic, "--transactional-id", "cli-file", "--transaction-size", "3",
                  "--progress", "--file", str(lines))
    assert bounded.stderr.decode().splitlines()[-1] == f"% Produced 7 messages to {topic} in 3 transaction(s)"
    wait_for_transaction(broker, "cli-file", "CompleteCommit")
    assert committed_values(broker, topic) == [b"m%d" % i for i in range(7)] * 2


# ---- describe-producers --------------------------------------------------------------------------------------------

PRODUCER_HEADERS = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                    "CurrentTransactionStartOffset"]


def producers_of(broker, *args: str) -> dict[str, list[str]]:
    """describe-producers' rows by producer id, its header checked."""
    table = kafka_table(cli(broker, "transactions", "describe-producers", *args).stdout)
    assert table[0] == PRODUCER_HEADERS
    return {row[0]: row for row in table[1:]}


@pytest.mark.minikafka(brokers=2)
def test_describe_producers_as_kafka_transactions_sh(minikafka_cluster):
    cluster = minikafka_cluster
    topic = "cli-producers"
    cluster.state.create_topic(topic, partitions=1, replication_factor=1)
    leader = cluster.wait_for_leader(topic, 0)
    other = cluster.broker(1 if leader.node_id == 2 else 2)  # holds no replica of the partition
    bootstrap = other.bootstrap_servers  # the command reaches the leader through the other broker's metadata
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": "cli-described",
                              "transaction.timeout.ms": 300_000})
    try:
        transactional.init_transactions(30)
        transactional.begin_transaction()
        for value in (b"t1", b"t2"):
            transactional.produce(topic, value=value, partition=0)
        assert transactional.flush(30) == 0
        idempotent = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for value in (b"i1", b"i2", b"i3"):
            idempotent.produce(topic, value=value, partition=0)
        assert idempotent.flush(30) == 0
        del idempotent
        txn = cluster.state.transaction("cli-described")
        records = {r.value: r for r in cluster.state.records(topic)}

        rows = producers_of(other, "--topic", topic, "--partition", "0")
        # Kafka's tool takes --bootstrap-server before the command too, and --broker-id asks that broker.
        before = kafka_table(subprocess.run(
            [sys.executable, "-m", "minikafka", "transactions", "--bootstrap-server", bootstrap, "describe-producers",
             "-t", topic, "-p", "0", "--broker-id", str(leader.node_id)],
            capture_output=True, timeout=CLI_TIMEOUT_S, check=True).stdout)
        assert {row[0]: row for row in before[1:]} == rows
        assert len(rows) == 2
        # The open transaction starts at offset 0 and holds the partition's last stable offset there; the
        # idempotent producer has none open. No marker was written yet: no coordinator epoch.
        assert rows[str(txn.producer_id)] == [str(txn.producer_id), str(txn.producer_epoch), "-1", "1",
                                              str(records[b"t2"].timestamp), "0"]
        (idempotent_id,) = set(rows) - {str(txn.producer_id)}
        assert rows[idempotent_id][1:] == ["0", "-1", "2", str(records[b"i3"].timestamp), "None"]

        transactional.commit_transaction(30)
        wait_until(lambda: cluster.state.transaction("cli-described").state == "CompleteCommit",
                   message="the commit markers to be written")
        committed = producers_of(other, "-t", topic, "-p", "0")[str(txn.producer_id)]
        assert committed[5] == "None" and int(committed[2]) >= 0  # the marker's coordinator epoch

        # The broker with no replica of the partition cannot describe its producers.
        refused = cli(other, "transactions", "describe-producers", "-t", topic, "-p", "0", "--broker-id",
                      str(other.node_id), check=False)
        assert refused.returncode == 1
        assert refused.stderr.decode().startswith(
            f"Error: Failed to describe producers for partition {topic}-0 on broker {other.node_id}: "
            "NOT_LEADER_OR_FOLLOWER: "), refused.stderr
        missing = cli(other, "transactions", "describe-producers", "-t", "cli-no-such-topic", "-p", "0",
                      check=False)
        assert missing.returncode == 1
        assert missing.stderr.decode().startswith(
            "Error: Failed to describe producers for partition cli-no-such-topic-0 on leader: "
            "UNKNOWN_TOPIC_OR_PARTITION"), missing.stderr
    finally:
        del transactional  # librdkafka's threads and connections go now, also when a failure keeps this frame
