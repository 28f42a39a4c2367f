"""The client-side commands as a user types them: topics, produce/consume (kcat-style), groups, transactions,
faults."""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.cli import build_parser
from tests.helpers import wait_until
from tests.raw_client import RawConnection

CLI_TIMEOUT_S = 60


def cli(broker, *args: str, stdin: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "minikafka", *args, "--bootstrap-server", broker.bootstrap_servers],
                          input=stdin, capture_output=True, timeout=CLI_TIMEOUT_S)
    if check and proc.returncode != 0:
        raise AssertionError(f"minikafka {' '.join(args)} exited {proc.returncode}: {proc.stderr.decode()}")
    return proc


# ---- topics --------------------------------------------------------------------------------------------------------

def test_topics_create_list_describe_delete(minikafka_session_broker):
    broker = minikafka_session_broker
    out = cli(broker, "topics", "create", "--topic", "cli-orders", "--partitions", "3", "--config",
              "retention.ms=1234").stdout.decode()
    assert out == "Created topic cli-orders.\n"
    assert "cli-orders" in cli(broker, "topics", "list").stdout.decode().splitlines()

    lines = cli(broker, "topics", "describe", "--topic", "cli-orders").stdout.decode().splitlines()
    head = lines[0].split("\t")
    assert head[0] == "Topic: cli-orders"
    assert head[1].startswith("TopicId: ") and len(head[1]) == len("TopicId: ") + 22  # Kafka's base64 Uuid
    assert head[2:4] == ["PartitionCount: 3", "ReplicationFactor: 1"]
    assert "retention.ms=1234" in head[4]
    assert lines[1:] == [f"\tTopic: cli-orders\tPartition: {i}\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: N/A"
                         f"\tLastKnownElr: N/A" for i in range(3)]

    again = cli(broker, "topics", "create", "--topic", "cli-orders", check=False)
    assert again.returncode == 1 and b"already exists" in again.stderr
    assert cli(broker, "topics", "create", "--topic", "cli-orders", "--if-not-exists").returncode == 0

    assert cli(broker, "topics", "delete", "-t", "cli-orders").stdout == b"Deleted topic cli-orders.\n"
    assert "cli-orders" not in cli(broker, "topics", "list").stdout.decode().splitlines()
    missing = cli(broker, "topics", "delete", "--topic", "cli-orders", check=False)
    assert missing.returncode == 1 and b"does not exist" in missing.stderr


def test_topics_regex_selects_topics(minikafka_session_broker):
    broker = minikafka_session_broker
    for name in ("rx-a", "rx-b", "other-rx"):
        cli(broker, "topics", "create", "--topic", name)
    assert cli(broker, "topics", "list", "--topic", "rx-.*").stdout.decode().split() == ["rx-a", "rx-b"]
    described = cli(broker, "topics", "describe", "-t", "rx-.*").stdout.decode()
    assert described.count("PartitionCount") == 2 and "other-rx" not in described
    assert cli(broker, "topics", "delete", "-t", "rx-.*").stdout == b"Deleted topic rx-a.\nDeleted topic rx-b.\n"


@pytest.mark.parametrize("topic, options, error", [
    ("cli-too-many-replicas", ["--replication-factor", "5"], "INVALID_REPLICATION_FACTOR"),
    ("cli-bad-config", ["--config", "retention.ms=soon"], "INVALID_CONFIG"),
    ("cli-no-partitions", ["--partitions", "0"], "INVALID_PARTITIONS"),
    ("cli bad name!", [], "INVALID_TOPIC_EXCEPTION"),
])
def test_a_refused_create_is_one_line_with_kafka_s_error_name_and_the_broker_s_message(minikafka_session_broker,
                                                                                         topic, options, error):
    broker = minikafka_session_broker
    refused = cli(broker, "topics", "create", "-t", topic, *options, check=False)
    assert refused.returncode == 1
    lines = refused.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0] == f"Error: {error}: {broker_error_message(broker, topic, options)}"


def broker_error_message(broker, topic: str, options: list[str]) -> str:
    """What the broker itself answers a CreateTopics of `topic` with `options` (a KafkaAdminClient's request)."""
    settings = dict(zip(options[::2], options[1::2], strict=True))
    key, _, value = settings.get("--config", "=").partition("=")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        answer = admin.create_topics({topic: {"num_partitions": int(settings.get("--partitions", -1)),
                                              "replication_factor": int(settings.get("--replication-factor", -1)),
                                              "configs": {key: value} if key else {}}}, raise_errors=False)
    finally:
        admin.close()
    (result,) = answer["topics"]
    assert result["error_code"] != 0 and result["error_message"]
    return result["error_message"]


# ---- the command line itself ---------------------------------------------------------------------------------------

def test_version_is_the_installed_distribution_s():
    proc = subprocess.run([sys.executable, "-m", "minikafka", "--version"], capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S)
    assert proc.returncode == 0
    assert proc.stdout == f"minikafka {importlib.metadata.version('minikafka')}\n"


def test_every_option_of_every_command_has_help_and_topic_is_t():
    def walk(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.Action]]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                described = {choice.dest: choice.help for choice in action._choices_actions}
                for name, sub in action.choices.items():
                    assert described.get(name), f"{path} {name} has no help"
                    yield from walk(sub, f"{path} {name}")
            else:
                yield path, action

    actions = list(walk(build_parser(), "minikafka"))
    assert len(actions) > 100
    assert [f"{path} {'/'.join(a.option_strings) or a.dest}" for path, a in actions if not a.help] == []
    topics = [(path, a.option_strings) for path, a in actions if "--topic" in a.option_strings]
    assert len(topics) == 14
    assert [path for path, options in topics if "-t" not in options] == []


# ---- produce and consume -------------------------------------------------------------------------------------------

def test_produce_with_key_delimiter_and_headers_then_consume_with_format(minikafka_session_broker):
    broker = minikafka_session_broker
    cli(broker, "topics", "create", "--topic", "cli-kv")
    cli(broker, "produce", "-t", "cli-kv", "-K", ":", "-H", "source=cli", "-H", "n=1",
        stdin=b"k1:v1\nk2:v:2\nnokey\n")
    out = cli(broker, "consume", "-t", "cli-kv", "-e", "-f", "%p|%o|%k|%s|%K|%S|%h\\n").stdout.decode()
    assert out.splitlines() == ["0|0|k1|v1|2|2|source=cli,n=1", "0|1|k2|v:2|2|3|source=cli,n=1",
                                "0|2||nokey|-1|5|source=cli,n=1"]
    default = cli(broker, "consume", "-t", "cli-kv", "-e", "-K", "=").stdout
    assert default == b"k1=v1\nk2=v:2\n=nokey\n"


def test_consume_json_offsets_counts_and_timestamps(minikafka_session_broker):
    broker = minikafka_session_broker
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=0)
    base = int(time.time() * 1000) - 100_000
    try:
        for i in range(6):
            producer.send("cli-json", value=b"v%d" % i, key=b"k%d" % i, timestamp_ms=base + i * 1000,
                          headers=[("h", b"x%d" % i)]).get(timeout=20)
    finally:
        producer.close()

    first = json.loads(cli(broker, "consume", "-t", "cli-json", "-J", "-c", "1").stdout)
    assert first == {"topic": "cli-json", "partition": 0, "offset": 0, "tstype": "create", "ts": base,
                     "headers": ["h", "x0"], "key": "k0", "payload": "v0"}
    by_offset = cli(broker, "consume", "-t", "cli-json", "-o", "4", "-e").stdout
    assert by_offset == b"v4\nv5\n"
    from_end = cli(broker, "consume", "-t", "cli-json", "-o", "-2", "-e").stdout
    assert from_end == b"v4\nv5\n"
    by_time = cli(broker, "consume", "-t", "cli-json", "-o", f"s@{base + 2500}", "-e", "-f", "%o %T\\n").stdout
    assert by_time.decode().splitlines() == [f"3 {base + 3000}", f"4 {base + 4000}", f"5 {base + 5000}"]
    assert cli(broker, "consume", "-t", "cli-json", "-o", "end", "-e").stdout == b""


def test_produce_to_a_partition_with_a_fixed_key_and_custom_delimiter(minikafka_session_broker):
    broker = minikafka_session_broker
    cli(broker, "topics", "create", "--topic", "cli-part", "--partitions", "2")
    cli(broker, "produce", "-t", "cli-part", "-p", "1", "-k", "K", "-D", ";", stdin=b"a;b;c")
    assert cli(broker, "consume", "-t", "cli-part", "-p", "1", "-e", "-f", "%k%s,").stdout == b"Ka,Kb,Kc,"
    assert cli(broker, "consume", "-t", "cli-part", "-p", "0", "-e").stdout == b""


def test_progress_and_summary_go_to_stderr(minikafka_session_broker):
    broker = minikafka_session_broker
    produced = cli(broker, "produce", "-t", "cli-progress", "--progress", stdin=b"1\n2\n3\n")
    assert produced.stdout == b""
    assert produced.stderr.decode().splitlines()[-1] == "% Produced 3 messages to cli-progress"
    consumed = cli(broker, "consume", "-t", "cli-progress", "-e", "--progress")
    assert consumed.stdout == b"1\n2\n3\n"
    assert consumed.stderr.decode().splitlines()[-1] == "% Consumed 3 messages from cli-progress"


def test_consume_unknown_topic_is_a_clear_error(minikafka_session_broker):
    proc = cli(minikafka_session_broker, "consume", "-t", "cli-no-such-topic", "-e", check=False)
    assert proc.returncode == 1
    assert b"cli-no-such-topic" in proc.stderr and b"Traceback" not in proc.stderr


# ---- groups --------------------------------------------------------------------------------------------------------

def test_groups_list_and_describe_in_kafka_layout(minikafka_session_broker):
    broker = minikafka_session_broker
    cli(broker, "topics", "create", "--topic", "cli-grp", "--partitions", "2")
    cli(broker, "produce", "-t", "cli-grp", "-p", "0", stdin=b"a\nb\nc\n")
    cli(broker, "produce", "-t", "cli-grp", "-p", "1", stdin=b"d\n")
    consumed = cli(broker, "consume", "-t", "cli-grp", "-G", "cli-group-1", "-e").stdout
    assert sorted(consumed.split()) == [b"a", b"b", b"c", b"d"]
    assert "cli-group-1" in cli(broker, "groups", "list").stdout.decode().splitlines()

    described = cli(broker, "groups", "describe", "--group", "cli-group-1")
    assert b"has no active members" in described.stderr
    lines = [line.split() for line in described.stdout.decode().splitlines() if line.strip()]
    assert lines[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                        "HOST", "CLIENT-ID"]
    assert lines[1:] == [["cli-group-1", "cli-grp", "0", "3", "3", "0", "-", "-", "-"],
                         ["cli-group-1", "cli-grp", "1", "1", "1", "0", "-", "-", "-"]]


def test_groups_describe_members_of_a_live_group(minikafka_session_broker):
    broker = minikafka_session_broker
    cli(broker, "topics", "create", "--topic", "cli-live")
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="cli-live-group",
                             client_id="live-client", auto_offset_reset="earliest")
    try:
        # A metadata update between subscribe() and the first poll, so that the first assignment has the topic:
        # kafka-python 3.0.12 can lose a member in the rebalance a later metadata change would start (see the
        # group scenario worker in tests/group_worker.py).
        consumer.subscribe(["cli-live"])
        consumer.topics()
        def assigned() -> bool:
            consumer.poll(timeout_ms=200)
            return bool(consumer.assignment())

        wait_until(assigned, interval=0, message="the consumer's partition assignment")
        members = cli(broker, "groups", "describe", "--group", "cli-live-group", "--members", "--verbose")
        rows = [line.split() for line in members.stdout.decode().splitlines() if line.strip()]
        # Kafka 4.1's columns for either protocol; a classic member has no epochs or target assignment.
        assert rows[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
                           "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
        assert rows[1][0] == "cli-live-group" and rows[1][3] == "live-client"
        assert rows[1][4:] == ["1", "-", "cli-live:0", "-", "-"]
        state = cli(broker, "groups", "describe", "--group", "cli-live-group", "--state").stdout.decode()
        assert "Stable" in state and f"({1})" in state
    finally:
        consumer.close()


def test_describe_unknown_group_fails(minikafka_session_broker):
    proc = cli(minikafka_session_broker, "groups", "describe", "--group", "cli-no-such-group", check=False)
    assert proc.returncode == 1 and b"does not exist" in proc.stderr


# ---- transactions --------------------------------------------------------------------------------------------------

def kafka_table(stdout: bytes) -> list[list[str]]:
    """The rows of a table as Kafka's tools print it (kafka-transactions.sh's): each cell padded to its column's
    width and followed by a tab."""
    lines = stdout.decode().splitlines()
    assert lines and all(line.endswith("\t") for line in lines), lines
    cells = [line.split("\t")[:-1] for line in lines]
    for column in zip(*cells, strict=True):
        assert len({len(cell) for cell in column}) == 1, column
    return [[cell.rstrip() for cell in row] for row in cells]


def wait_for_transaction(broker, transactional_id: str, state: str) -> None:
    """Until the coordinator has finished ending a transaction: EndTxn is answered before the markers are written,
    as in Kafka, and CompleteCommit or CompleteAbort is logged after them."""
    wait_until(lambda: broker.state.transaction(transactional_id).state == state,
               message=f"the transaction of {transactional_id} to be {state}")


def confluent_transaction(bootstrap: str, transactional_id: str, topic: str, values: list[bytes]) -> Producer:
    """A confluent-kafka transactional producer with an open transaction that wrote `values` to partition 0 (its
    timeout well past the test's length, so only the test ends it)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 300_000})
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0
    return producer


def test_produce_in_transactions_then_consume_only_what_was_committed(broker):
    cli(broker, "topics", "create", "--topic", "cli-tx")
    produced = cli(broker, "produce", "-t", "cli-tx", "--transactional-id", "cli-loader", "--transaction-size", "2",
                   "--progress", stdin=b"a\nb\nc\nd\ne\n")
    assert produced.stderr.decode().splitlines()[-1] == "% Produced 5 messages to cli-tx in 3 transaction(s)"
    wait_for_transaction(broker, "cli-loader", "CompleteCommit")
    # Each commit marker takes an offset that no reader is shown: gaps after b, d and e.
    for level in ("read_committed", "read_uncommitted"):
        printed = cli(broker, "consume", "-t", "cli-tx", "-e", "--isolation-level", level, "-f", "%o=%s\\n").stdout
        assert printed.decode().split() == ["0=a", "1=b", "3=c", "4=d", "6=e"]
    # Without --transaction-size, input that is all there at once is one transaction, committed at its end.
    cli(broker, "produce", "-t", "cli-tx", "--transactional-id", "cli-whole", stdin=b"f\ng\n")
    wait_for_transaction(broker, "cli-whole", "CompleteCommit")
    state = broker.state.partition("cli-tx", 0)
    assert state.high_watermark == state.last_stable_offset == 11
    assert [(r.offset, r.value) for r in broker.state.records("cli-tx", isolation_level="read_committed")][-2:] == [
        (8, b"f"), (9, b"g")]
    loader, whole = broker.state.transaction("cli-loader"), broker.state.transaction("cli-whole")
    assert kafka_table(cli(broker, "transactions", "list").stdout) == [
        ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
        ["cli-loader", "1", str(loader.producer_id), "CompleteCommit"],
        ["cli-whole", "1", str(whole.producer_id), "CompleteCommit"]]


def test_produce_in_transactions_refuses_what_cannot_be_committed(broker):
    cli(broker, "topics", "create", "--topic", "cli-tx-refused")
    for options, error in [(["--transactional-id", "x", "--acks", "1"], "--transactional-id needs --acks all"),
                           (["--transaction-size", "2"], "--transaction-size needs --transactional-id"),
                           (["--transactional-id", "x", "--transaction-size", "0"], "--transaction-size must be 1")]:
        refused = cli(broker, "produce", "-t", "cli-tx-refused", *options, stdin=b"a\n", check=False)
        assert refused.returncode == 1 and refused.stderr.decode().startswith(f"Error: {error}"), refused.stderr

    cli(broker, "produce", "-t", "cli-tx-refused", "--transactional-id", "cli-refused", "--transaction-size", "2",
        stdin=b"a\nb\n")
    wait_for_transaction(broker, "cli-refused", "CompleteCommit")
    broker.faults.fail_requests("Produce", "CORRUPT_MESSAGE", count=1, topic="cli-tx-refused")
    failed = cli(broker, "produce", "-t", "cli-tx-refused", "--transactional-id", "cli-refused", "--transaction-size",
                 "2", stdin=b"c\nd\ne\n", check=False)
    assert failed.returncode == 1
    assert failed.stderr.decode().splitlines()[-1] == (
        "Error: a transaction of 2 message(s) was not committed and is aborted: CORRUPT_MESSAGE: injected by "
        "minikafka fault injection")
    wait_for_transaction(broker, "cli-refused", "CompleteAbort")
    state = broker.state.partition("cli-tx-refused", 0)
    assert state.last_stable_offset == state.high_watermark  # aborted: nothing holds read_committed readers
    assert [r.value for r in broker.state.records("cli-tx-refused", isolation_level="read_committed")] == [b"a",
                                                                                                            b"b"]


def test_an_open_transaction_is_listed_holds_the_lso_and_is_aborted_by_its_start_offset(broker):
    topic = "cli-tx-open"
    cli(broker, "topics", "create", "--topic", topic)
    held = confluent_transaction(broker.bootstrap_servers, "cli-held", topic, [b"open-1", b"open-2"])
    try:
        cli(broker, "produce", "-t", topic, stdin=b"plain-1\nplain-2\n")
        state = broker.state.partition(topic, 0)
        assert (state.last_stable_offset, state.high_watermark) == (0, 4)  # held where the transaction began
        txn = broker.state.transaction("cli-held")
        assert (txn.state, txn.partitions, txn.timeout_ms) == ("Ongoing", [(topic, 0)], 300_000)

        listed = kafka_table(cli(broker, "transactions", "list", "--state-filter", "Ongoing").stdout)
        assert listed[1:] == [["cli-held", "1", str(txn.producer_id), "Ongoing"]]
        assert kafka_table(cli(broker, "transactions", "list", "--state-filter", "CompleteCommit").stdout)[1:] == []
        assert kafka_table(cli(broker, "transactions", "list", "--duration-filter", "600000").stdout)[1:] == []
        assert kafka_table(cli(broker, "transactions", "list", "--producer-id-filter", str(txn.producer_id),
                               "--transactional-id-pattern", "cli-h.*").stdout)[1:] == listed[1:]
        described = kafka_table(cli(broker, "transactions", "describe", "--transactional-id", "cli-held").stdout)
        assert described[0] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                                "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                                "TopicPartitions"]
        row = described[1]
        assert row[:6] + row[8:] == ["1", "cli-held", str(txn.producer_id), str(txn.producer_epoch), "Ongoing",
                                     "300000", f"{topic}-0"]
        assert int(row[6]) == txn.start_time_ms and int(row[7]) >= 0

        # read_committed readers stop at the LSO: nothing of the partition is printed, and -e still ends.
        assert cli(broker, "consume", "-t", topic, "-e", "--isolation-level", "read_committed").stdout == b""
        assert cli(broker, "consume", "-t", topic, "-e").stdout == b"open-1\nopen-2\nplain-1\nplain-2\n"
        # Its coordinator will end it (the partition is in its transaction): Kafka's tool counts it as not hanging.
        hanging = cli(broker, "transactions", "find-hanging", "--topic", topic, "--max-transaction-timeout", "0")
        assert kafka_table(hanging.stdout)[1:] == []

        assert cli(broker, "transactions", "abort", "-t", topic, "-p", "0", "--start-offset", "0").stdout == b""
        state = broker.state.partition(topic, 0)
        assert state.last_stable_offset == state.high_watermark == 5  # after the abort marker
        assert [r.value for r in broker.state.records(topic, isolation_level="read_committed")] == [b"plain-1",
                                                                                                     b"plain-2"]
        again = cli(broker, "transactions", "abort", "-t", topic, "-p", "0", "--start-offset", "0", check=False)
        assert again.returncode == 1
        assert again.stderr.decode() == (f"Error: Could not find any open transactions starting at offset 0 on "
                                         f"partition {topic}-0\n")
    finally:
        del held  # librdkafka's threads and connections go now, also when a failure keeps this frame


def open_transaction_unknown_to_its_coordinator(bootstrap: str, transactional_id: str,
                                                topic: str) -> tuple[int, int]:
    """A hanging transaction, as producers could leave one before KIP-890: a transactional batch written to
    partition 0 without AddPartitionsToTxn, so the coordinator's transaction does not include the partition and
    will never end the partition's transaction (the broker must not verify transactional batches). Returns the
    producer id and epoch."""
    with RawConnection(bootstrap) as conn:
        answers = []

        def initialized() -> bool:  # the coordinator may still be loading __transaction_state
            answers.append(conn.request(InitProducerIdRequest[4](transactional_id=transactional_id,
                                                                 transaction_timeout_ms=60000, producer_id=-1,
                                                                 producer_epoch=-1)))
            return answers[-1].error_code == 0

        wait_until(initialized, message="a producer id for the transactional id")
        init = answers[-1]
        builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20, transactional=True,
                                       producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                                       base_sequence=0)
        builder.append(timestamp=None, key=None, value=b"hanging", headers=[])
        builder.close()
        response = conn.request(ProduceRequest[9](transactional_id=transactional_id, acks=-1, timeout_ms=10000,
                                                  topic_data=[(topic, [(0, bytes(builder.buffer()))])]))
    assert response.responses[0].partition_responses[0].error_code == 0, response
    return init.producer_id, init.producer_epoch


def test_find_hanging_finds_what_no_coordinator_will_end_once_older_than_the_timeout(broker_factory):
    broker = broker_factory(transaction_partition_verification_enable="false")
    topic = "cli-tx-hanging"
    cli(broker, "topics", "create", "--topic", topic)
    producer_id, epoch = open_transaction_unknown_to_its_coordinator(broker.bootstrap_servers, "cli-ghost", topic)
    assert broker.state.transaction("cli-ghost").partitions == []
    assert broker.state.partition(topic, 0).last_stable_offset == 0

    found = kafka_table(cli(broker, "transactions", "find-hanging", "--broker-id", "1",
                            "--max-transaction-timeout", "0").stdout)
    assert found[0] == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                        "LastTimestamp", "Duration(min)"]
    assert [row[:6] + row[7:] for row in found[1:]] == [[topic, "0", str(producer_id), str(epoch), "-1", "0", "0"]]
    assert cli(broker, "transactions", "find-hanging", "-t", topic, "-p", "0", "--max-transaction-timeout",
               "0").stdout == cli(broker, "transactions", "find-hanging", "-t", topic, "--max-transaction-timeout",
                                  "0").stdout
    # Younger than the default 15 minutes (Kafka's transaction.max.timeout.ms): a coordinator might still end it.
    assert kafka_table(cli(broker, "transactions", "find-hanging", "--broker-id", "1").stdout)[1:] == []
    # Broker 2 holds no replica of it.
    assert kafka_table(cli(broker, "transactions", "find-hanging", "--broker-id", "2",
                           "--max-transaction-timeout", "0").stdout)[1:] == []

    cli(broker, "transactions", "abort", "-t", topic, "-p", "0", "--producer-id", str(producer_id),
        "--producer-epoch", str(epoch), "--coordinator-epoch", "-1")
    state = broker.state.partition(topic, 0)
    assert state.last_stable_offset == state.high_watermark == 2
    assert kafka_table(cli(broker, "transactions", "find-hanging", "--broker-id", "1",
                           "--max-transaction-timeout", "0").stdout)[1:] == []


@pytest.mark.parametrize("args, error", [
    (["find-hanging"], "find-hanging needs --topic or --broker-id to limit the search"),
    (["find-hanging", "--broker-id", "1", "--partition", "0"], "--partition needs --topic"),
    (["find-hanging", "--topic", "cli-no-such-topic"], "Failed to describe topic 'cli-no-such-topic': "
                                                       "UNKNOWN_TOPIC_OR_PARTITION: "),
    (["abort", "-t", "t", "-p", "0"], "name the transaction to abort with --start-offset, or with --producer-id, "
                                      "--producer-epoch and --coordinator-epoch"),
    (["abort", "-t", "t", "-p", "0", "--start-offset", "0", "--producer-id", "1"],
     "use either --start-offset or --producer-id"),
    (["abort", "-t", "t", "-p", "0", "--producer-id", "1", "--producer-epoch", "0"],
     "--producer-id needs --coordinator-epoch"),
    (["describe", "--transactional-id", "cli-no-such-id"],
     "Failed to describe transaction state of transactional-id `cli-no-such-id`: TRANSACTIONAL_ID_NOT_FOUND"),
])
def test_transactions_errors_are_one_line(minikafka_session_broker, args, error):
    refused = cli(minikafka_session_broker, "transactions", *args, check=False)
    assert refused.returncode == 1
    lines = refused.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {error}"), lines


# ---- faults --------------------------------------------------------------------------------------------------------

def test_fault_commands_inject_list_and_clear(minikafka_broker):
    broker = minikafka_broker
    out = cli(broker, "fault", "error", "--api", "Produce", "--error", "NOT_LEADER_OR_FOLLOWER", "--count", "2",
              "--topic", "t", "--partition", "0").stdout.decode()
    assert out == "Added fault 1: Produce fails with NOT_LEADER_OR_FOLLOWER for t-0 for the next 2 request(s)\n"
    cli(broker, "fault", "latency", "--ms", "250", "--api", "Fetch")
    cli(broker, "fault", "disk-full", "--quota-bytes", "1000000")
    listed = cli(broker, "fault", "list").stdout.decode().splitlines()
    assert [line.split("\t")[1] for line in listed] == ["error", "latency", "disk"]
    assert [f["kind"] for f in broker.faults.list()] == ["error", "latency", "disk"]
    assert cli(broker, "fault", "clear", "--kind", "latency").stdout == b"Cleared 1 fault(s).\n"
    assert cli(broker, "fault", "clear").stdout == b"Cleared 2 fault(s).\n"
    assert broker.faults.list() == []

    refused = cli(broker, "fault", "error", "--api", "Produce", "--error", "NO_SUCH_ERROR", check=False)
    assert refused.returncode == 1 and b"unknown error code" in refused.stderr


def test_a_cleaner_crash_is_armed_listed_and_cleared_from_the_cli(minikafka_broker):
    broker = minikafka_broker
    out = cli(broker, "fault", "crash-cleaner", "--at", "mid-swap", "--topic", "table").stdout.decode()
    assert out.endswith(": the broker dies at the log cleaner's mid-swap of topic table\n"), out
    [line] = cli(broker, "fault", "list").stdout.decode().splitlines()
    assert line.split("\t")[1:] == ["cleaner-crash", "the broker dies at the log cleaner's mid-swap of topic table"]
    assert broker.faults.list()[0]["at"] == "mid-swap"
    assert cli(broker, "fault", "clear", "--kind", "cleaner-crash").stdout == b"Cleared 1 fault(s).\n"
    assert broker.faults.list() == []
    refused = cli(broker, "fault", "crash-cleaner", "--at", "halfway", check=False)
    assert refused.returncode == 2 and b"invalid choice" in refused.stderr


def test_fault_error_from_cli_is_seen_by_a_producer(minikafka_broker):
    broker = minikafka_broker
    cli(broker, "topics", "create", "--topic", "t")
    cli(broker, "fault", "error", "--api", "Produce", "--error", "KAFKA_STORAGE_ERROR", "--forever")
    failed = cli(broker, "produce", "-t", "t", "-q", "--delivery-timeout-ms", "1500", stdin=b"x\n", check=False)
    assert failed.returncode == 1 and b"not delivered" in failed.stderr
    cli(broker, "fault", "clear")
    cli(broker, "produce", "-t", "t", stdin=b"y\n")
    assert cli(broker, "consume", "-t", "t", "-e").stdout == b"y\n"


def test_error_names_are_kafka_s_own_as_typed(minikafka_broker):
    broker = minikafka_broker
    cli(broker, "topics", "create", "-t", "t")
    added = cli(broker, "fault", "error", "--api", "Produce", "--error", "NOT_LEADER_OR_FOLLOWER", "--forever",
                "-t", "t").stdout.decode()
    assert added == "Added fault 1: Produce fails with NOT_LEADER_OR_FOLLOWER for t until cleared\n"
    assert cli(broker, "fault", "list").stdout.decode().split("\t")[2].startswith(
        "Produce fails with NOT_LEADER_OR_FOLLOWER")
    retried = cli(broker, "produce", "-t", "t", "--delivery-timeout-ms", "1500", stdin=b"x\n", check=False)
    assert retried.returncode == 1
    assert b"the broker answered NOT_LEADER_OR_FOLLOWER" in retried.stderr
    assert b"NOT_LEADER_FOR_PARTITION" not in retried.stderr  # kafka-python's name from before Kafka 2.4

    cli(broker, "fault", "clear")
    cli(broker, "fault", "error", "--api", "Produce", "--error", "INVALID_TOPIC_EXCEPTION", "--forever")
    refused = cli(broker, "produce", "-t", "t", stdin=b"x\n", check=False)
    assert refused.returncode == 1
    last = refused.stderr.decode().splitlines()[-1]
    assert last.startswith("Error: 1 message(s) not delivered, first: INVALID_TOPIC_EXCEPTION: "), last


@pytest.mark.minikafka(in_process=False)  # shutdown ends the broker's process: it must have its own
def test_close_connections_and_shutdown_from_cli(minikafka_broker):
    broker = minikafka_broker
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    try:
        producer.send("t", b"x").get(timeout=20)
        closed = cli(broker, "fault", "close-connections").stdout.decode()
        assert closed.startswith("Closed ") and int(closed.split()[1]) >= 1
        assert producer.send("t", b"y").get(timeout=20).offset == 1
    finally:
        producer.close()
    pid = broker.pid
    assert cli(broker, "fault", "shutdown").stdout == b"Broker shutting down.\n"
    wait_until(lambda: not broker.running, message="the `minikafka serve` process to exit, as on SIGTERM")
    log_text = broker.log_path.read_text()
    assert "shutdown requested through the control API" in log_text and "broker 1 stopped" in log_text
    assert pid is not None
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", broker.port), timeout=1)


@pytest.mark.parametrize("command", [["topics", "list"], ["fault", "list"], ["groups", "list"],
                                     ["transactions", "list"]])
def test_unreachable_broker_is_a_one_line_error(command):
    with socket.socket() as unreachable:  # bound, never listening: connections are refused and no one else binds it
        unreachable.bind(("127.0.0.1", 0))
        address = "{}:{}".format(*unreachable.getsockname())
        proc = subprocess.run([sys.executable, "-m", "minikafka", *command, "--bootstrap-server", address],
                              capture_output=True, timeout=CLI_TIMEOUT_S)
    assert proc.returncode == 1
    assert proc.stderr.startswith(b"Error: ") and b"Traceback" not in proc.stderr
