"""The waits a test makes on a broker or a cluster, shared by both handles: each until a condition holds, with a
timeout and a TimeoutError naming what was seen last; the offset waits are answered by the partition's leader (the
group's coordinator) when the offset moves, not polled."""
from __future__ import annotations

from typing import TYPE_CHECKING

from minikafka.node_handle import DEFAULT_WAIT_S
from minikafka.request_recording import DEFAULT_RECORDING_SIZE

if TYPE_CHECKING:
    from minikafka.request_recording import Recording
    from minikafka.state import GroupState, State


class StateWaits:
    """Mixed into `Broker` and `Cluster`, which give it their `state`."""

    @property
    def state(self) -> State:
        raise NotImplementedError

    def wait_for_group(self, group_id: str, state: str | None = None, members: int | None = None,
                       timeout: float = DEFAULT_WAIT_S, generation_at_least: int | None = None) -> GroupState:
        """Until the group (classic or consumer protocol) is in `state` (Kafka's name, e.g. "Stable") with
        `members` members and a generation (a consumer group's group epoch) of at least `generation_at_least`;
        returns it as `state.group()` describes it (see minikafka.state)."""
        return self.state.wait_for_group(group_id, state=state, members=members, timeout=timeout,
                                         generation_at_least=generation_at_least)

    def wait_for_committed(self, group_id: str, topic: str, partition: int, offset: int,
                           timeout: float = DEFAULT_WAIT_S) -> int:
        """Until the group has committed `offset` or a later one for the partition (a transaction's offsets once it
        commits); returns the committed offset then."""
        return self.state.wait_for_committed(group_id, topic, partition, offset, timeout)

    def wait_for_topic(self, topic: str, partitions: int | None = None, timeout: float = DEFAULT_WAIT_S) -> None:
        """Until every broker knows the topic (with at least `partitions` partitions) and each partition has a
        leader: the moment after a topic is created (by any tool or by auto-creation) when clients can use it."""
        self.state.wait_for_topic(topic, partitions, timeout)

    def recording(self, size: int = DEFAULT_RECORDING_SIZE) -> Recording:
        """Record the requests the broker (every broker of the cluster) answers: `with broker.recording() as rec:`,
        then `rec.entries`, `rec.filter(api=..., topic=...)`, `rec.wait_for(api=..., **fields)`,
        `rec.dump_jsonl(path)` (see minikafka.request_recording)."""
        return self.state.recording(size)

    def wait_for_records(self, topic: str, count: int, timeout: float = DEFAULT_WAIT_S) -> int:
        """Until the topic holds at least `count` readable records over all its partitions (transaction markers
        count, as they take offsets); returns how many it holds then."""
        return self.state.wait_for_records(topic, count, timeout)

    def wait_for_high_watermark(self, topic: str, partition: int, offset: int,
                                timeout: float = DEFAULT_WAIT_S) -> int:
        """Until the partition's high watermark is at `offset` or past it (its records up to there are replicated
        and readable); returns the high watermark then."""
        return self.state.wait_for_offset(topic, partition, offset, "high_watermark", timeout)

    def wait_for_lso(self, topic: str, partition: int, offset: int, timeout: float = DEFAULT_WAIT_S) -> int:
        """Until the partition's last stable offset is at `offset` or past it (read_committed consumers read up to
        there: the transactions before it are decided); returns the last stable offset then."""
        return self.state.wait_for_offset(topic, partition, offset, "last_stable_offset", timeout)
