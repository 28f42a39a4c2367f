"""A follower's fetches go through an incremental fetch session with its leader (KIP-227): once caught up, its
fetches and the leader's answers carry no partitions until something changes, and a session the leader lost
(evicted, or gone with a restart) falls back to a full fetch without losing anything."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from minikafka.broker.replication.fetch_session_handler import FetchRequestData
from minikafka.broker.replication.replica_fetcher import ReplicaFetcher
from minikafka.protocol.errors import ErrorCode
from tests.helpers import wait_until_async
from tests.unit.replication_cluster import ReplicationCluster, produce, running_cluster, stored_batches

TOPIC = "sessions"
PARTITIONS = 20


@dataclass(frozen=True)
class Exchange:
    """One fetch of the follower and its answer, as seen on the wire."""

    session_id: int
    epoch: int
    sent: frozenset[int]
    forgotten: int
    error: int
    answered_session: int
    answered: frozenset[int]


@pytest.fixture
def exchanges(monkeypatch: pytest.MonkeyPatch) -> list[Exchange]:
    seen: list[Exchange] = []
    process = ReplicaFetcher._process_fetch_response

    async def spy(self: ReplicaFetcher, client: Any, response: Any, sent: Any, request: FetchRequestData) -> None:
        seen.append(Exchange(request.session_id, request.epoch, frozenset(i for _, i in request.to_send),
                             len(request.to_forget), response.error_code, response.session_id,
                             frozenset(p.partition_index for t in response.responses for p in t.partitions)))
        await process(self, client, response, sent, request)

    monkeypatch.setattr(ReplicaFetcher, "_process_fetch_response", spy)
    return seen


def caught_up(cluster: ReplicationCluster) -> bool:
    return all(cluster.log(2, TOPIC, i).log_end_offset == cluster.log(1, TOPIC, i).log_end_offset
               and cluster.partition(2, TOPIC, i).high_watermark == cluster.partition(1, TOPIC, i).high_watermark
               for i in range(PARTITIONS))


def idle_since(exchanges: list[Exchange], start: int, count: int) -> bool:
    """`count` fetches after `start` that sent and were answered nothing, within a session."""
    return sum(1 for e in exchanges[start:] if e.session_id and e.epoch > 0 and not e.sent and not e.answered
               and e.error == 0) >= count


async def test_an_idle_follower_sends_and_receives_no_partitions(tmp_path: Path, exchanges: list[Exchange]) -> None:
    async with running_cluster(tmp_path, broker_ids=(1, 2)) as cluster:
        cluster.controller.create_topic(TOPIC, {i: [1, 2] for i in range(PARTITIONS)})
        assert (await produce(cluster, 1, TOPIC, [b"a", b"b"], index=3)).error_code == 0
        await wait_until_async(lambda: caught_up(cluster), message="broker 2 to replicate")
        await wait_until_async(lambda: idle_since(exchanges, 0, 3), message="idle fetches in a session")
        first = exchanges[0]
        assert (first.session_id, first.epoch) == (0, 0) and first.answered == first.sent
        session_id = exchanges[-1].session_id
        assert session_id != 0
        assert {i for e in exchanges for i in e.sent} == set(range(PARTITIONS))
        (session,) = cluster.servers[1].fetch_sessions.sessions.values()
        assert session.id == session_id and session.privileged and len(session.partitions) == PARTITIONS
        epochs = [e.epoch for e in exchanges if e.session_id == session_id]
        assert epochs == list(range(1, len(epochs) + 1))  # one session, its epoch counting up

        # New records on one partition: the answer carries that partition alone, then the fetch that follows
        # sends that partition alone (its fetch offset moved), and the answer to it its new high watermark.
        start = len(exchanges)
        assert (await produce(cluster, 1, TOPIC, [b"c"], index=11)).error_code == 0
        await wait_until_async(lambda: caught_up(cluster), message="broker 2 to replicate the new record")
        await wait_until_async(lambda: idle_since(exchanges, start, 2), message="idle fetches again")
        changed = [e for e in exchanges[start:] if e.sent or e.answered]
        assert changed and all(e.sent <= {11} and e.answered <= {11} for e in changed)
        assert any(e.sent == {11} for e in changed) and any(e.answered == {11} for e in changed)
        assert all(e.session_id == session_id and e.forgotten == 0 for e in exchanges[start:])
        for i in (3, 11):
            assert stored_batches(cluster.log(2, TOPIC, i)) == stored_batches(cluster.log(1, TOPIC, i))


async def test_a_session_the_leader_lost_is_replaced_by_a_full_fetch(tmp_path: Path,
                                                                    exchanges: list[Exchange]) -> None:
    async with running_cluster(tmp_path, broker_ids=(1, 2)) as cluster:
        cluster.controller.create_topic(TOPIC, {i: [1, 2] for i in range(PARTITIONS)})
        assert (await produce(cluster, 1, TOPIC, [b"a"], index=0)).error_code == 0
        await wait_until_async(lambda: caught_up(cluster), message="broker 2 to replicate")
        await wait_until_async(lambda: idle_since(exchanges, 0, 1), message="an idle fetch in a session")
        old_session = exchanges[-1].session_id
        # The leader drops its sessions (as an eviction or a restart does) while records arrive.
        start = len(exchanges)
        cluster.servers[1].fetch_sessions.sessions.clear()
        assert (await produce(cluster, 1, TOPIC, [b"b"], index=5)).error_code == 0
        await wait_until_async(lambda: caught_up(cluster), message="broker 2 to replicate after losing its session")
        await wait_until_async(lambda: idle_since(exchanges, start, 2), message="idle fetches in a new session")
        # A fetch that was already parked is answered within the old session; the next one is refused.
        after = exchanges[start:]
        refused = next(i for i, e in enumerate(after) if e.error)
        assert all(e.session_id == old_session for e in after[:refused + 1])
        assert (after[refused].error, after[refused].answered) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, frozenset())
        full = after[refused + 1]
        assert (full.session_id, full.epoch, full.sent) == (0, 0, frozenset(range(PARTITIONS)))
        assert full.error == 0 and full.answered == full.sent and full.answered_session not in (0, old_session)
        assert all(e.error == 0 and e.session_id == full.answered_session for e in after[refused + 2:])
        for i in (0, 5):
            assert stored_batches(cluster.log(2, TOPIC, i)) == stored_batches(cluster.log(1, TOPIC, i))


async def test_without_slots_the_follower_keeps_fetching_in_full(tmp_path: Path, exchanges: list[Exchange]) -> None:
    async with running_cluster(tmp_path, broker_ids=(1, 2)) as cluster:
        cluster.servers[1].fetch_sessions.max_entries = 0
        cluster.controller.create_topic(TOPIC, {i: [1, 2] for i in range(PARTITIONS)})
        assert (await produce(cluster, 1, TOPIC, [b"a"], index=7)).error_code == 0
        await wait_until_async(lambda: caught_up(cluster), message="broker 2 to replicate")
        start = len(exchanges)
        await wait_until_async(lambda: len(exchanges) >= start + 2, message="a few more fetches")
        assert all(e.session_id == 0 and e.epoch == 0 and e.answered_session == 0 for e in exchanges)
        assert all(e.sent == e.answered == frozenset(range(PARTITIONS)) for e in exchanges[-2:])
