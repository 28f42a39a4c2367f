"""What the cluster fault tests assert after a history of kills, pauses and restarts.

- Accounting: every record a producer was acknowledged for is in the partition exactly once, at the offset its
  acknowledgement named; records are told apart by their values, which the tests make unique.
- Replicas: each replica's partition directory, read from its broker's data dir once the replicas have caught up
  (or the brokers are stopped), holds the same record batches (base offset, last offset, leader epoch, CRC,
  producer id and sequence) and the same leader-epoch-checkpoint entries for them; and those entries are exactly
  the epoch changes of the batches (each epoch starts at its first batch).

- Transaction state on disk: the replicas' aborted-transaction indexes (`.txnindex`) hold the same entries, and
  their producer-state snapshots (`.snapshot`) at the offsets every replica has one are the same bytes.

What Kafka guarantees of the checkpoint beyond that: a broker that becomes leader records its epoch at its log end
offset before any batch of that epoch exists (`maybeAssignEpochStartOffset`), while followers learn epochs only from
batches; a later epoch at the same start offset replaces such an entry. So each replica's checkpoint is the epoch
changes of its batches, followed on a replica that led an epoch without writing by at most one entry of a later
epoch at its log end offset. An election the test did not cause (a load spike) leaves exactly that.
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, Producer

from minikafka.protocol.record_batch import BatchHeader, batch_crc_ok, iter_batches
from minikafka.storage.checkpoint import EpochEntry, read_leader_epoch_checkpoint, read_offset_checkpoint
from minikafka.storage.leader_epoch_cache import LEADER_EPOCH_CHECKPOINT
from minikafka.storage.log_dir import REPLICATION_CHECKPOINT
from minikafka.storage.producer_state_snapshot import decode_snapshot, list_snapshot_offsets, snapshot_file
from minikafka.storage.segment import LOG_SUFFIX, TXN_INDEX_SUFFIX
from minikafka.storage.transaction_index import AbortedTxn, TransactionIndex

if TYPE_CHECKING:
    from minikafka.broker_handle import Broker
    from minikafka.cluster_handle import Cluster
    from minikafka.state import Record


# ---- acknowledgements ---------------------------------------------------------------------------------------------

@dataclass
class Acknowledgements:
    """What a producer was told, gathered from its delivery reports (on any thread): the offset of each
    acknowledged value per partition, and the errors it reported (a test expects none)."""

    offsets: dict[int, dict[int, bytes]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def acknowledged(self, partition: int, offset: int, value: bytes) -> None:
        """Noted; an offset acknowledged for two values is noted as an error (a client's callback thread may
        swallow an exception)."""
        with self._lock:
            previous = self.offsets.setdefault(partition, {}).setdefault(offset, value)
            if previous != value:
                self.errors.append(f"partition {partition} offset {offset} acknowledged for {previous!r} and for "
                                   f"{value!r}")

    def failed(self, error: str) -> None:
        with self._lock:
            self.errors.append(error)

    def count(self) -> int:
        with self._lock:
            return sum(len(by_offset) for by_offset in self.offsets.values())

    def of(self, partition: int) -> dict[int, bytes]:
        with self._lock:
            return dict(self.offsets.get(partition, {}))


def assert_acknowledged_exactly_once(records: Iterable[Record], acknowledged: Mapping[int, bytes],
                                     where: str) -> None:
    """Every acknowledged value sits at its acknowledged offset, and no value is stored twice (the producers these
    tests use are idempotent, or never retry a write that may have landed)."""
    stored = list(records)
    by_offset = {r.offset: r.value for r in stored}
    wrong = [(offset, value, by_offset.get(offset)) for offset, value in sorted(acknowledged.items())
             if by_offset.get(offset) != value]
    assert not wrong, (f"{where}: {len(wrong)} of {len(acknowledged)} acknowledged records are not at their "
                       f"acknowledged offsets; first (offset, acknowledged value, stored value): {wrong[:5]}")
    twice = sorted((value, count) for value, count in Counter(r.value for r in stored).items() if count > 1)
    assert not twice, f"{where}: {len(twice)} values are stored more than once, e.g. {twice[:5]}"


# ---- replicas on disk ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StoredBatch:
    """A record batch as a replica's segment file holds it (what must match byte for byte across replicas: the
    CRC covers everything after the leader epoch)."""

    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int
    producer_id: int
    base_sequence: int

    @classmethod
    def of(cls, header: BatchHeader) -> StoredBatch:
        return cls(header.base_offset, header.last_offset, header.partition_leader_epoch, header.crc,
                   header.producer_id, header.base_sequence)


@dataclass(frozen=True)
class ReplicaLog:
    broker_id: int
    batches: list[StoredBatch]
    epochs: list[EpochEntry]


def partition_dir(broker: Broker, topic: str, partition: int) -> Path:
    """The partition's dir in whichever of the broker's log dirs holds it (the first one if none does)."""
    found = [d / f"{topic}-{partition}" for d in broker.log_dirs if (d / f"{topic}-{partition}").is_dir()]
    return found[0] if found else broker.log_dirs[0] / f"{topic}-{partition}"


def stored_batches(directory: Path) -> list[StoredBatch]:
    """The batches of every segment of a partition directory, in offset order; a batch whose CRC does not match
    its bytes, or bytes after the last whole batch, fail the test."""
    batches: list[StoredBatch] = []
    for path in sorted(directory.glob(f"*{LOG_SUFFIX}"), key=lambda p: int(p.stem)):
        data = path.read_bytes()
        end = 0
        for position, header in iter_batches(data):
            assert batch_crc_ok(data, position, header), f"{path}: batch at offset {header.base_offset} fails its CRC"
            batches.append(StoredBatch.of(header))
            end = position + header.size
        assert end == len(data), f"{path}: {len(data) - end} bytes after the last whole batch (at byte {end})"
    return batches


def leader_epochs(directory: Path) -> list[EpochEntry]:
    return read_leader_epoch_checkpoint(directory / LEADER_EPOCH_CHECKPOINT)


def replica_log(broker: Broker, topic: str, partition: int) -> ReplicaLog:
    directory = partition_dir(broker, topic, partition)
    return ReplicaLog(broker.node_id, stored_batches(directory), leader_epochs(directory))


def high_watermark_checkpoint(broker: Broker, topic: str, partition: int) -> int | None:
    """The broker's replication-offset-checkpoint entry for the partition (None: none written yet)."""
    return read_offset_checkpoint(broker.data_dir / REPLICATION_CHECKPOINT).get((topic, partition))


def epoch_changes(batches: list[StoredBatch]) -> list[EpochEntry]:
    """Where each leader epoch starts in a list of batches: the leader-epoch-checkpoint a follower derives."""
    entries: list[EpochEntry] = []
    for batch in batches:
        if not entries or entries[-1].epoch != batch.leader_epoch:
            entries.append(EpochEntry(batch.leader_epoch, batch.base_offset))
    return entries


def written_epochs(log: ReplicaLog) -> list[EpochEntry]:
    """The checkpoint without a last entry at the log end offset: an epoch this replica led without a batch."""
    end = log.batches[-1].last_offset + 1 if log.batches else 0
    if log.epochs and log.epochs[-1].start_offset == end:
        return log.epochs[:-1]
    return log.epochs


def assert_well_formed(log: ReplicaLog, where: str) -> None:
    """Offsets follow on from batch to batch, leader epochs never go down, and the checkpoint matches the batches
    (with at most one later, empty epoch at the log end)."""
    for before, after in zip(log.batches, log.batches[1:], strict=False):
        assert after.base_offset == before.last_offset + 1, (
            f"{where}, broker {log.broker_id}: batch at {after.base_offset} follows one ending at {before.last_offset}")
        assert after.leader_epoch >= before.leader_epoch, (
            f"{where}, broker {log.broker_id}: leader epoch {after.leader_epoch} at offset {after.base_offset} "
            f"after epoch {before.leader_epoch}")
    written = written_epochs(log)
    assert written == epoch_changes(log.batches), (
        f"{where}, broker {log.broker_id}: leader-epoch-checkpoint {log.epochs} is not the epoch changes of its "
        f"batches {epoch_changes(log.batches)}")
    if len(log.epochs) > len(written) and written:
        assert log.epochs[-1].epoch > written[-1].epoch, (
            f"{where}, broker {log.broker_id}: leader-epoch-checkpoint {log.epochs} ends with an epoch that does "
            f"not follow its last batch's")


def assert_replicas_identical(cluster: Cluster, topic: str, partition: int = 0) -> list[StoredBatch]:
    """Every replica of the partition holds the same batches and checkpointed epochs for them; returns the batches.

    Call it when the replicas have caught up (`cluster.wait_for_replicas_caught_up`) and nothing is producing, or
    with the brokers stopped.
    """
    where = f"{topic}-{partition}"
    replicas = cluster.state.partition(topic, partition).replicas
    logs = [replica_log(cluster.broker(r), topic, partition) for r in replicas]
    for log in logs:
        assert_well_formed(log, where)
    reference = logs[0]
    for log in logs[1:]:
        if log.batches != reference.batches:
            first = next((i for i, (a, b) in enumerate(zip(reference.batches, log.batches, strict=False)) if a != b),
                         min(len(reference.batches), len(log.batches)))
            raise AssertionError(
                f"{where}: brokers {reference.broker_id} and {log.broker_id} differ from batch {first} on "
                f"({len(reference.batches)} and {len(log.batches)} batches): "
                f"{reference.batches[first:first + 2]} vs {log.batches[first:first + 2]}")
        assert written_epochs(log) == written_epochs(reference), (
            f"{where}: leader-epoch-checkpoint of broker {reference.broker_id} {reference.epochs} != that of broker "
            f"{log.broker_id} {log.epochs}")
    return reference.batches


def aborted_transactions(directory: Path) -> list[AbortedTxn]:
    """The entries of a partition's aborted-transaction indexes (`.txnindex`), segment after segment."""
    entries: list[AbortedTxn] = []
    for path in sorted(directory.glob(f"*{TXN_INDEX_SUFFIX}"), key=lambda p: int(p.stem)):
        entries.extend(TransactionIndex(path).entries)
    return entries


def assert_transaction_files_identical(directories: Mapping[int, Path], where: str) -> list[int]:
    """The replicas' partition directories (by broker id) hold the same aborted transactions, and the same bytes in
    the producer-state snapshots at each offset where every replica has one; returns those offsets.

    Every snapshot must be readable (version and CRC). Call it with the brokers stopped: snapshots are written in
    place, and a clean shutdown is what writes the last ones.

    The aborted transactions are compared as one list per replica, not file by file: a follower appends a fetched
    run of batches at once and rolls, if it must, before the run, so its segments may start at other offsets than
    the leader's (in Kafka as here), and each `.txnindex` belongs to a segment.

    A snapshot at offset N is the producers' state after the batches below N, so replicas with identical batches
    have identical snapshots wherever they have one at the same offset (minikafka writes the entries in producer id
    order; Kafka's order is its hash map's). Which offsets a replica has one at depends on its own history:
    - each roll writes one at the new segment's base offset, on leaders and followers alike (Kafka's
      UnifiedLog.roll), but segment boundaries may differ between replicas (above);
    - each load of the log (a start, a restart after kill -9, a follower's truncation) writes one at the log end
      offset of that moment and at the base offsets of the last two segments if it replayed them, and a recovery
      after kill -9 first deletes the ones past the recovery point (written since the last flush, so not trusted);
    - a clean shutdown writes one at the log end offset, the same on every replica that has caught up.
    So only the offsets every replica has are compared; the others exist where that replica's rolls, restarts and
    truncations put them.
    """
    snapshots = {broker: {offset: snapshot_file(directory, offset).read_bytes()
                          for offset in list_snapshot_offsets(directory)}
                 for broker, directory in directories.items()}
    for found in snapshots.values():
        for data in found.values():
            decode_snapshot(data)  # CorruptSnapshotError if it is not sound
    reference, *others = sorted(directories)
    indexed = aborted_transactions(directories[reference])
    for broker in others:
        assert aborted_transactions(directories[broker]) == indexed, (
            f"{where}: the aborted transactions indexed on broker {broker} differ from broker {reference}'s "
            f"{indexed}")
    shared = sorted(set.intersection(*(set(found) for found in snapshots.values())))
    for offset in shared:
        differing = [broker for broker in others if snapshots[broker][offset] != snapshots[reference][offset]]
        assert not differing, (
            f"{where}: the producer snapshot at offset {offset} on broker {differing[0]} "
            f"{decode_snapshot(snapshots[differing[0]][offset])} differs from broker {reference}'s "
            f"{decode_snapshot(snapshots[reference][offset])}")
    return shared


MAX_RECORDS = 200_000  # bounds the producer loop; a run writes a fraction of it
MAX_IN_FLIGHT = 300  # records handed to the producer and not yet reported
FLUSH_S = 60.0


class SteadyProducer(threading.Thread):
    """confluent-kafka with enable.idempotence (acks=all) writing unique values round-robin to the partitions of
    a topic until stopped; every delivery report lands in `acks`.

    `records_per_second` paces the writes (as fast as acknowledgements allow when None): a load that must stay
    below a replication throttle. `padding` bytes follow each value's unique prefix (larger logs)."""

    def __init__(self, bootstrap_servers: str, topic: str, partitions: int, acks: Acknowledgements, *,
                 records_per_second: float | None = None, padding: int = 0) -> None:
        super().__init__(name=f"steady-producer-{topic}", daemon=True)
        self.topic = topic
        self.partitions = partitions
        self.acks = acks
        self.records_per_second = records_per_second
        self.padding = b"x" * padding
        self.client_errors: list[KafkaError] = []
        self.sent = 0
        self.unflushed = -1
        self.failure: BaseException | None = None
        self._stop_requested = threading.Event()
        self._producer = Producer({
            "bootstrap.servers": bootstrap_servers, "enable.idempotence": True, "acks": "all", "linger.ms": 2,
            "message.timeout.ms": 60000, "retry.backoff.ms": 20, "retry.backoff.max.ms": 200,
            "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200, "error_cb": self.client_errors.append,
        })

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            self.acks.acknowledged(msg.partition(), msg.offset(), msg.value())
        else:
            self.acks.failed(f"{msg.value()!r}: {err}")

    def run(self) -> None:
        try:
            started = time.monotonic()
            while not self._stop_requested.is_set() and self.sent < MAX_RECORDS:
                if len(self._producer) >= MAX_IN_FLIGHT:
                    self._producer.poll(0.05)
                    continue
                if self.records_per_second is not None:
                    early_s = started + self.sent / self.records_per_second - time.monotonic()
                    if early_s > 0:  # serving delivery reports until the next write is due
                        self._producer.poll(min(early_s, 0.05))
                        continue
                self._producer.produce(self.topic, value=b"%s-%08d" % (self.topic.encode(), self.sent) + self.padding,
                                       partition=self.sent % self.partitions, on_delivery=self._delivered)
                self.sent += 1
                self._producer.poll(0.001)
            self.unflushed = self._producer.flush(FLUSH_S)
        except BaseException as exc:  # noqa: BLE001 - reported by finish()
            self.failure = exc

    def finish(self, context: str = "") -> None:
        """Stop writing, wait for every report; raise what the thread raised, assert nothing is left unreported
        and no delivery failed (`context` opens the assertion's message)."""
        self._stop_requested.set()
        self.join(FLUSH_S + 10)
        assert not self.is_alive(), f"{context}the producer did not finish flushing"
        if self.failure is not None:
            raise self.failure
        assert self.unflushed == 0, f"{context}{self.unflushed} records unreported after {FLUSH_S} s"
        assert not self.acks.errors, f"{context}delivery errors: {self.acks.errors[:5]}"

    def highest_acknowledged(self, partition: int = 0) -> int:
        return max(self.acks.of(partition), default=-1)


def assert_every_acknowledged_record_kept(cluster: Cluster, topic: str, partitions: int, acks: Acknowledgements,
                                          wait_s: float) -> None:
    """Exactly once at its acknowledged offset, on replicas that hold identical batches."""
    cluster.wait_for_replicas_caught_up(topic, timeout=wait_s)
    for partition in range(partitions):
        assert_acknowledged_exactly_once(cluster.state.records(topic, partition), acks.of(partition),
                                         f"{topic}-{partition}")
        assert_replicas_identical(cluster, topic, partition)
