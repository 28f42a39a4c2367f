"""The share coordinator over a log: election loads the partition's records back into the same state, resignation
answers NOT_COORDINATOR, and the coordinator key hashes as Kafka's does."""
import uuid
from typing import Any

import trio

from minikafka.broker.coordinator.coordinator_log import ReplayedBatch, partition_for
from minikafka.broker.coordinator.share.share_coordinator import ShareCoordinator, coordinator_key, kafka_uuid_string
from minikafka.broker.coordinator.share.share_coordinator_shard import ShareCoordinatorShard, SharePartitionKey
from minikafka.protocol.coordinator_records.share_coordinator_records import StateBatch
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.record_batch import NO_PRODUCER_ID

TOPIC = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
KEY = SharePartitionKey("grp", TOPIC, 1)


class _Log:
    """An in-memory `__share_group_state`: the records each partition was appended, as bytes."""

    topic = "__share_group_state"

    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[bytes, bytes | None]]] = {}

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]], now_ms: int) -> ErrorCode:
        self.partitions.setdefault(partition, []).extend(records)
        return ErrorCode.NONE

    async def wait_replicated(self, partition: int) -> ErrorCode:
        return ErrorCode.NONE

    def is_empty(self, partition: int) -> bool:
        return not self.partitions.get(partition)

    def replay_batches(self, partition: int) -> Any:
        for offset, (key, value) in enumerate(self.partitions.get(partition, [])):
            yield ReplayedBatch(NO_PRODUCER_ID, None, [(offset, key, value)])


def _coordinator(state_log: _Log) -> ShareCoordinator:
    return ShareCoordinator(state_log, lambda: 50,  # type: ignore[arg-type]
                            lambda: ShareCoordinatorShard(lambda _t: 4, lambda: 7, 3), lambda: 7)


def test_coordinator_key_is_group_kafka_uuid_partition() -> None:
    assert kafka_uuid_string(TOPIC) == "a6e4EJ2tEdGAtADAT9QwyA"
    assert coordinator_key(KEY) == "grp:a6e4EJ2tEdGAtADAT9QwyA:1"


def test_state_survives_moving_to_a_new_coordinator() -> None:
    async def main() -> None:
        state_log = _Log()
        partition = partition_for(coordinator_key(KEY), 50)
        first = _coordinator(state_log)
        async with trio.open_nursery() as nursery:
            await nursery.start(first.run)
            assert (await first.execute(KEY, lambda s: s.read(KEY, 0))).error == ErrorCode.NOT_COORDINATOR
            first.on_elected(partition, 0)
            assert (await first.execute(KEY, lambda s: s.initialize(KEY, 1, 0))).error == ErrorCode.NONE
            for i in range(6):  # past a snapshot: 3 updates per snapshot
                result = await first.execute(KEY, lambda s, i=i: s.write(KEY, 1, 2, i, (StateBatch(i, i + 1, 2, 1),)))
                assert result.error == ErrorCode.NONE
            expected = first._partitions[partition].shard.state(KEY)  # type: ignore[union-attr]
            first.on_resigned(partition)
            assert (await first.execute(KEY, lambda s: s.read(KEY, 2))).error == ErrorCode.NOT_COORDINATOR

            second = _coordinator(state_log)
            second.on_elected(partition, 1)
            assert (await second.execute(KEY, lambda s: s.read(KEY, 2))).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            await nursery.start(second.run)
            with trio.fail_after(10):
                while (result := await second.execute(KEY, lambda s: s.read(KEY, 3))).error != ErrorCode.NONE:
                    assert result.error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                    await trio.sleep(0.01)
            assert result.state == expected
            assert expected is not None and (expected.start_offset, expected.state_batches) == (
                5, (StateBatch(5, 6, 2, 1),))
            # The read recorded leader epoch 3, so the old leader's epoch is fenced now.
            assert (await second.execute(KEY, lambda s: s.write(KEY, 1, 2, -1, ()))).error == \
                ErrorCode.FENCED_LEADER_EPOCH
            nursery.cancel_scope.cancel()

    trio.run(main)
