"""Log compaction on a live broker: keyed updates and tombstones produced by real clients, a cleaning pass run
through `broker.clean_logs`, and what consumers then read, offset by offset."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType

import minikafka
from minikafka.control_client import ControlError
from minikafka.protocol.record_batch import ATTRIBUTES_OFFSET
from tests.helpers import admin_create_topic, wait_until

Record = tuple[int, bytes | None, bytes | None]  # offset, key, value

# The cleaner threads stay off where a test runs each pass itself, so that what a pass cleans is the test's to know.
MANUAL = {"log_cleaner_enable": "false"}
COMPACTED = {"cleanup.policy": "compact", "internal.segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01"}


def produce_keyed(bootstrap: str, topic: str, pairs: list[tuple[bytes, bytes | None]]) -> list[Record]:
    """Produce (key, value) pairs in order to partition 0 with kafka-python; returns each one's acked offset."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, batch_size=4096)
    try:
        futures = [(producer.send(topic, key=k, value=v, partition=0), k, v) for k, v in pairs]
        producer.flush(timeout=30)
        return [(f.get(timeout=30).offset, k, v) for f, k, v in futures]
    finally:
        producer.close(timeout=10)


def consume_all(bootstrap: str, topic: str, end_offset: int, start: int = 0,
                isolation: str = "read_committed") -> list[Record]:
    """Every record of partition 0 from `start` up to `end_offset`, with confluent-kafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, 0, start)])
    out: list[Record] = []
    deadline = time.monotonic() + 30
    try:
        while (not out or out[-1][0] < end_offset - 1) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            out.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return out


def compacted(produced: list[Record], cleaned_up_to: int, *, drop_tombstones: bool = False) -> list[Record]:
    """Kafka's result of cleaning `produced` up to `cleaned_up_to`: below it, the last record of each key at its own
    offset (tombstones too, unless their delete horizon has passed); from it on, everything."""
    last: dict[bytes | None, int] = {}
    for offset, key, _value in produced:
        if offset < cleaned_up_to:
            last[key] = offset
    kept = []
    for offset, key, value in produced:
        if offset >= cleaned_up_to:
            kept.append((offset, key, value))
        elif last[key] == offset and not (drop_tombstones and value is None):
            kept.append((offset, key, value))
    return kept


def segment_files(broker, topic: str) -> list[str]:
    return sorted(p.name for p in Path(broker.data_dir, f"{topic}-0").iterdir())


def test_last_value_of_each_key_is_kept_at_its_offset(broker_factory):
    broker = broker_factory(**MANUAL)
    admin_create_topic(broker.bootstrap_servers, "keyed", 1, **COMPACTED)
    pairs = [(b"key-%03d" % (i % 50), b"value-%05d-" % i + b"x" * 100) for i in range(3000)]
    produced = produce_keyed(broker.bootstrap_servers, "keyed", pairs)
    assert [o for o, _k, _v in produced] == list(range(3000))

    [cleaned] = broker.clean_logs("keyed")
    assert (cleaned["topic"], cleaned["partition"], cleaned["first_dirty_offset"]) == ("keyed", 0, 0)
    up_to = cleaned["cleaned_up_to"]
    assert 0 < up_to < 3000  # the active segment is never cleaned
    assert cleaned["messages_read"] == up_to
    assert cleaned["messages_retained"] == 50
    assert cleaned["bytes_written"] < cleaned["bytes_read"]

    assert consume_all(broker.bootstrap_servers, "keyed", 3000) == compacted(produced, up_to)
    state = broker.state.partition("keyed", 0)
    assert state.cleaner_checkpoint == up_to
    assert state.log_end_offset == 3000 and state.high_watermark == 3000
    assert not [name for name in segment_files(broker, "keyed") if name.endswith((".cleaned", ".swap"))]
    # Nothing dirty is cleanable now (the rest is in the active segment): a pass cleans nothing.
    assert broker.clean_logs("keyed") == []
    [metrics] = broker.state.metrics().values()
    assert metrics["kafka_log_logcleaner_cleaner_recopy_percent"] == pytest.approx(
        100 * cleaned["bytes_written"] / cleaned["bytes_read"])
    assert metrics["kafka_log_logcleaner_max_clean_time_secs"] > 0
    assert metrics["kafka_log_logcleanermanager_max_dirty_percent"] == pytest.approx(
        100 * broker.state.partition("keyed", 0).dirty_ratio)
    assert [v for k, v in metrics.items() if k.startswith("kafka_log_logcleanermanager_uncleanable")] == [0, 0]


def test_tombstones_survive_the_first_cleaning_and_go_after_delete_retention(broker_factory):
    broker = broker_factory(**MANUAL)
    admin_create_topic(broker.bootstrap_servers, "tombstones", 1, **COMPACTED, **{"delete.retention.ms": "1000"})
    first = produce_keyed(broker.bootstrap_servers, "tombstones",
                          [(b"k%02d" % (i % 20), b"v%04d" % i + b"y" * 200) for i in range(1000)]
                          + [(b"k%02d" % i, None) for i in range(10)]
                          + [(b"filler-%04d" % i, b"z" * 200) for i in range(300)])
    [pass_one] = broker.clean_logs("tombstones")
    up_to = pass_one["cleaned_up_to"]
    assert up_to > 1010, "the tombstones are in the cleaned section"
    after_one = compacted(first, up_to)
    assert consume_all(broker.bootstrap_servers, "tombstones", first[-1][0] + 1) == after_one
    assert [(k, v) for _o, k, v in after_one if v is None] == [(b"k%02d" % i, None) for i in range(10)]

    cleaned_at = time.monotonic()
    wait_until(lambda: time.monotonic() - cleaned_at > 1.5, message="delete.retention.ms to pass")
    second = produce_keyed(broker.bootstrap_servers, "tombstones",
                           [(b"later-%04d" % i, b"w" * 200) for i in range(300)])
    [pass_two] = broker.clean_logs("tombstones")
    assert pass_two["first_dirty_offset"] == up_to
    everything = first + second
    expected = [r for r in compacted(everything, pass_two["cleaned_up_to"])
                if not (r[2] is None and r[0] < up_to)]
    assert consume_all(broker.bootstrap_servers, "tombstones", everything[-1][0] + 1) == expected
    assert all(v is not None for _o, _k, v in expected if _o < up_to)


def test_compact_delete_also_deletes_by_retention(broker_factory):
    broker = broker_factory(log_retention_check_interval_ms=200, **MANUAL)
    admin_create_topic(broker.bootstrap_servers, "both", 1,
                       **{**COMPACTED, "cleanup.policy": "compact,delete", "retention.ms": "2000"})
    produced = produce_keyed(broker.bootstrap_servers, "both",
                             [(b"k%d" % (i % 10), b"v" * 200) for i in range(400)])
    [cleaned] = broker.clean_logs("both")
    assert cleaned["messages_retained"] == 10
    # Retention by record timestamp then removes the segments older than retention.ms, compacted or not; offsets
    # are never renumbered.
    wait_until(lambda: broker.state.partition("both", 0).log_start_offset >= cleaned["cleaned_up_to"],
               message="retention to delete the old segments")
    state = broker.state.partition("both", 0)
    assert state.log_end_offset == produced[-1][0] + 1
    rest = consume_all(broker.bootstrap_servers, "both", state.log_end_offset) if state.log_start_offset < \
        state.log_end_offset else []
    assert rest == [r for r in produced if r[0] >= state.log_start_offset]


def segment_bases(broker, topic: str) -> list[int]:
    return sorted(int(name.split(".")[0]) for name in segment_files(broker, topic) if name.endswith(".log"))


@pytest.mark.parametrize("at", ["before-swap", "mid-swap", "after-swap"])
def test_a_kill_during_a_cleaning_recovers_to_a_valid_log(broker_factory, at):
    broker = broker_factory(**MANUAL)
    admin_create_topic(broker.bootstrap_servers, "crashy", 1, **COMPACTED)
    produced = produce_keyed(broker.bootstrap_servers, "crashy",
                             [(b"key-%02d" % (i % 40), b"v%05d" % i + b"x" * 150) for i in range(2000)])
    bases = segment_bases(broker, "crashy")
    assert len(bases) > 3
    first_group_end, uncleanable = bases[1], bases[-1]  # each segment is a group of its own at this segment.bytes
    broker.faults.crash_cleaner(at, topic="crashy")
    with pytest.raises((ControlError, OSError)):
        broker.clean_logs("crashy", timeout=60)
    wait_until(lambda: not broker.running, message="the broker to die at the crash point")
    broker.start()

    files = segment_files(broker, "crashy")
    assert not [name for name in files if name.endswith((".cleaned", ".swap"))], files
    if at == "before-swap":
        expected = produced  # the .cleaned files are dropped: the old segments stand
    else:  # the first group's swap is completed (mid-swap by the log's recovery), the others never began
        last = {k: o for o, k, _v in produced if o < uncleanable}
        expected = [r for r in produced if r[0] >= first_group_end or last[r[1]] == r[0]]
    assert consume_all(broker.bootstrap_servers, "crashy", 2000) == expected
    assert broker.state.partition("crashy", 0).cleaner_checkpoint is None

    # The next cleaning starts from the start again and ends where an uninterrupted one would have.
    [cleaned] = broker.clean_logs("crashy")
    assert (cleaned["first_dirty_offset"], cleaned["cleaned_up_to"]) == (0, uncleanable)
    assert consume_all(broker.bootstrap_servers, "crashy", 2000) == compacted(produced, uncleanable)
    assert broker.state.partition("crashy", 0).cleaner_checkpoint == uncleanable


def test_a_consumer_reading_while_the_cleaner_runs_never_goes_back_nor_misses_a_last_value(broker_factory):
    broker = broker_factory(log_cleaner_backoff_ms=50)
    admin_create_topic(broker.bootstrap_servers, "live", 1, **COMPACTED)
    keys = [b"key-%03d" % i for i in range(60)]
    produced: list[Record] = []
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "live-reader",
                         "enable.auto.commit": False, "fetch.max.bytes": 8192, "message.max.bytes": 8192,
                         "max.partition.fetch.bytes": 4096, "queued.max.messages.kbytes": 64})
    consumer.assign([TopicPartition("live", 0, 0)])
    seen: list[Record] = []
    try:
        for round_ in range(6):
            produced += produce_keyed(broker.bootstrap_servers, "live",
                                      [(k, b"r%d-" % round_ + k + b"y" * 150) for k in keys] * 5)
            for _ in range(20):  # read a little each round, while the cleaner compacts behind and ahead of us
                message = consumer.poll(0.2)
                if message is not None and not message.error():
                    seen.append((message.offset(), message.key(), message.value()))
        end = produced[-1][0] + 1
        deadline = time.monotonic() + 60
        while (not seen or seen[-1][0] < end - 1) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                seen.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    offsets = [o for o, _k, _v in seen]
    assert offsets == sorted(set(offsets)), "offsets only ever go forward"
    assert offsets[-1] == end - 1
    by_offset = {o: (k, v) for o, k, v in produced}
    assert all(by_offset[o] == (k, v) for o, k, v in seen), "every record read is the one produced at its offset"
    last_read = {}
    for _o, k, v in seen:
        last_read[k] = v
    last_produced = {k: v for _o, k, v in produced}
    assert last_read == last_produced, "the last value of every key is read"
    assert broker.state.partition("live", 0).cleaner_checkpoint is not None, "the cleaner threads did clean"


def produce_transactions(bootstrap: str, topic: str, transactions: list[tuple[list[tuple[bytes, bytes]], bool]]
                         ) -> list[tuple[int, bytes, bytes, bool]]:
    """Keyed transactions with confluent-kafka, each committed or aborted; (offset, key, value, committed) of
    every record."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "compacted-txn", "linger.ms": 5,
                         "batch.size": 8192})  # each batch well within segment.bytes
    out: list[tuple[int, bytes, bytes, bool]] = []
    producer.init_transactions(30)
    for pairs, commit in transactions:
        offsets: list[int] = []
        producer.begin_transaction()
        for key, value in pairs:
            producer.produce(topic, key=key, value=value, partition=0,
                             on_delivery=lambda err, msg, got=offsets: got.append(-1 if err else msg.offset()))
        assert producer.flush(30) == 0
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        assert len(offsets) == len(pairs) and -1 not in offsets
        out += [(o, k, v, commit) for o, (k, v) in zip(offsets, pairs, strict=True)]
    producer.flush(10)
    return out


def consume_isolated(bootstrap: str, topic: str, isolation: str, until: int) -> list[Record]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"iso-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[Record] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.offset() >= until:  # the partition's end
                    break
                continue
            out.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return out


def keyed_transaction(t: int, keys: bytes, count: int, commit: bool) -> tuple[list[tuple[bytes, bytes]], bool]:
    return [(keys % (i % 30), b"t%d-%03d-" % (t, i) + b"v" * 300) for i in range(count)], commit


# Every third transaction aborted; or an aborted transaction over every key, spanning segments, after the last
# committed values of those keys (which must survive it), then others.
TRANSACTION_PATTERNS = {
    "every-third-aborted": [keyed_transaction(t, b"k%02d", 40, t % 3 != 1) for t in range(8)],
    "abort-across-segments": [keyed_transaction(0, b"k%02d", 40, True), keyed_transaction(1, b"k%02d", 120, False),
                              keyed_transaction(2, b"f%02d", 120, True)],
}


@pytest.mark.parametrize("pattern", sorted(TRANSACTION_PATTERNS))
def test_aborted_transactions_go_and_committed_ones_are_compacted(broker_factory, pattern):
    broker = broker_factory(**MANUAL)
    admin_create_topic(broker.bootstrap_servers, "txn-table", 1, **COMPACTED)
    transactions = TRANSACTION_PATTERNS[pattern]
    written = produce_transactions(broker.bootstrap_servers, "txn-table", transactions)
    [cleaned] = broker.clean_logs("txn-table")
    up_to = cleaned["cleaned_up_to"]
    assert up_to > 2 * 41, "the cleaning covers committed and aborted transactions"
    last_committed = {k: o for o, k, _v, committed in written if committed and o < up_to}
    kept = [(o, k, v, c) for o, k, v, c in written if o >= up_to or (c and last_committed[k] == o)]
    end = broker.state.partition("txn-table", 0).log_end_offset
    assert consume_isolated(broker.bootstrap_servers, "txn-table", "read_uncommitted", end) == \
        [(o, k, v) for o, k, v, _c in kept]
    assert consume_isolated(broker.bootstrap_servers, "txn-table", "read_committed", end) == \
        [(o, k, v) for o, k, v, c in kept if c]


def test_a_log_the_cleaner_cannot_read_is_marked_uncleanable_and_skipped(broker_factory):
    broker = broker_factory(**MANUAL)
    for topic in ("damaged", "healthy"):
        admin_create_topic(broker.bootstrap_servers, topic, 1, **COMPACTED)
        produce_keyed(broker.bootstrap_servers, topic, [(b"k%02d" % (i % 20), b"v" * 200) for i in range(400)])
    # The first batch claims gzip for records that are not: the cleaner cannot decode it (as a corrupt batch).
    first_segment = Path(broker.data_dir, "damaged-0", "00000000000000000000.log")
    with first_segment.open("r+b") as f:
        f.seek(ATTRIBUTES_OFFSET + 1)
        low = f.read(1)[0]
        f.seek(ATTRIBUTES_OFFSET + 1)
        f.write(bytes([(low & ~0x07) | 0x01]))

    bases_before = segment_bases(broker, "damaged")
    cleaned = broker.clean_logs()
    assert [(c["topic"], c["partition"]) for c in cleaned] == [("healthy", 0)], "the other logs are cleaned"
    assert broker.clean_logs("damaged") == [], "an uncleanable log is skipped"
    [metrics] = broker.state.metrics().values()
    counts = {k: v for k, v in metrics.items() if k.startswith("kafka_log_logcleanermanager_uncleanable_partitions")}
    assert list(counts.values()) == [1], counts
    lines = [line for line in Path(broker.log_path).read_text().splitlines() if "as uncleanable" in line]
    assert len(lines) == 1 and "damaged-0" in lines[0], lines
    # The broker goes on serving the partition (but for the batch damaged on disk), and nothing of it was changed.
    assert produce_keyed(broker.bootstrap_servers, "damaged", [(b"k00", b"after")])[0][0] == 400
    assert consume_all(broker.bootstrap_servers, "damaged", 401, start=400) == [(400, b"k00", b"after")]
    assert sorted(segment_bases(broker, "damaged")) == bases_before


def alter_topic(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    """Set these topic configs (kafka-python sends IncrementalAlterConfigs SET: the others stay)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)])
    finally:
        admin.close()


def test_compaction_lags_and_ratio_apply_as_soon_as_the_topic_config_changes(broker_factory):
    broker = broker_factory(**MANUAL)
    lagging = {**COMPACTED, "min.compaction.lag.ms": "3600000"}
    admin_create_topic(broker.bootstrap_servers, "lags", 1, **lagging)
    produced = produce_keyed(broker.bootstrap_servers, "lags", [(b"k%02d" % (i % 20), b"v" * 200) for i in range(400)])
    assert broker.clean_logs("lags") == [], "every segment is younger than min.compaction.lag.ms"
    assert broker.state.partition("lags", 0).dirty_ratio == 0.0

    alter_topic(broker.bootstrap_servers, "lags", {"min.compaction.lag.ms": "0", "min.cleanable.dirty.ratio": "0.99"})
    wait_until(lambda: broker.state.partition("lags", 0).dirty_ratio == 1.0, message="the new config applied")
    [first] = broker.clean_logs("lags")  # a never-cleaned log is all dirty: 1.0 > 0.99
    produced += produce_keyed(broker.bootstrap_servers, "lags", [(b"k%02d" % (i % 20), b"w" * 200)
                                                                 for i in range(100)])
    ratio = broker.state.partition("lags", 0).dirty_ratio
    assert ratio is not None and 0 < ratio < 0.99
    assert broker.clean_logs("lags") == [], "below min.cleanable.dirty.ratio and no max.compaction.lag.ms"

    # KIP-354: once its oldest dirty record is older than max.compaction.lag.ms, the log is cleaned whatever its ratio.
    alter_topic(broker.bootstrap_servers, "lags", {"max.compaction.lag.ms": "1"})
    wait_until(lambda: broker.clean_logs("lags"), message="the overdue log to be cleaned")
    state = broker.state.partition("lags", 0)
    assert state.cleaner_checkpoint is not None and state.cleaner_checkpoint > first["cleaned_up_to"]
    assert consume_all(broker.bootstrap_servers, "lags", len(produced)) == \
        compacted(produced, state.cleaner_checkpoint)


def test_an_in_process_broker_compacts_too(tmp_path):
    """In-process, cleanings run on worker threads of the test's own process: the same result."""
    with minikafka.Broker(data_dir=tmp_path / "data", log_path=tmp_path / "broker.log", in_process=True,
                          config={"log.cleaner.enable": "false"}) as broker:
        admin_create_topic(broker.bootstrap_servers, "inside", 1, **COMPACTED)
        produced = produce_keyed(broker.bootstrap_servers, "inside",
                                 [(b"k%02d" % (i % 10), b"v%03d" % i + b"x" * 300) for i in range(500)])
        [cleaned] = broker.clean_logs("inside")
        assert cleaned["messages_retained"] == 10
        assert consume_all(broker.bootstrap_servers, "inside", 500) == compacted(produced, cleaned["cleaned_up_to"])


def test_a_tombstone_goes_once_a_manual_clock_passes_delete_retention(tmp_path):
    """delete.retention.ms follows the broker's clock: with a manual clock the tombstone outlives a cleaning until
    the test advances the clock past it (Kafka's default, a day), with no real wait."""
    with minikafka.Broker(clock="manual", data_dir=tmp_path / "data", log_path=tmp_path / "broker.log",
                          config={"log.cleaner.enable": "false"}) as broker:
        admin_create_topic(broker.bootstrap_servers, "days", 1, **COMPACTED)
        first = produce_keyed(broker.bootstrap_servers, "days",
                              [(b"k%02d" % (i % 20), b"v" * 200) for i in range(200)] + [(b"k00", None)]
                              + [(b"filler-%04d" % i, b"z" * 200) for i in range(200)])
        [pass_one] = broker.clean_logs("days")
        up_to = pass_one["cleaned_up_to"]
        tombstone = next(o for o, k, v in first if v is None)
        assert up_to > tombstone
        assert (tombstone, b"k00", None) in consume_all(broker.bootstrap_servers, "days", first[-1][0] + 1)
        broker.clock.advance(86_400_000 + 1000)  # delete.retention.ms, 24 h
        second = produce_keyed(broker.bootstrap_servers, "days", [(b"later-%04d" % i, b"w" * 200) for i in range(200)])
        broker.clean_logs("days")
        remaining = consume_all(broker.bootstrap_servers, "days", second[-1][0] + 1)
        assert all(k != b"k00" for _o, k, _v in remaining), "the tombstone and the values it deleted are gone"


def test_dynamic_cleaner_configs_restart_the_cleaner_threads_with_them(broker_factory):
    """log.cleaner.threads and log.cleaner.backoff.ms altered for the broker (kafka-configs.sh --alter --entity-type
    brokers --entity-name 1) take effect without a restart, as Kafka's LogCleaner.reconfigure: a
    cleaner that would sleep an hour between looks cleans the dirty log soon after the change."""
    broker = broker_factory(log_cleaner_backoff_ms=3_600_000)
    admin_create_topic(broker.bootstrap_servers, "reconfigured", 1, **COMPACTED)
    produced = produce_keyed(broker.bootstrap_servers, "reconfigured",
                             [(b"k%02d" % (i % 20), b"v%04d" % i + b"z" * 200) for i in range(2000)])
    assert broker.state.partition("reconfigured", 0).cleaner_checkpoint is None
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, str(broker.node_id), configs={
            "log.cleaner.threads": "2", "log.cleaner.backoff.ms": "100"})])
    finally:
        admin.close()
    wait_until(lambda: broker.state.partition("reconfigured", 0).cleaner_checkpoint is not None, timeout=60,
               message="the reconfigured cleaner to clean the log")
    state = broker.state.partition("reconfigured", 0)
    assert consume_all(broker.bootstrap_servers, "reconfigured", len(produced)) == compacted(
        produced, state.cleaner_checkpoint)
    log_text = Path(broker.log_path).read_text()
    assert "log cleaner reconfigured: CleanerConfig(num_threads=2" in log_text
    assert "backoff_ms=100," in log_text
