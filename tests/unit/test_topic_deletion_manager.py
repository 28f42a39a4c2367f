"""A deleted topic is finished only once every replica, on every broker that held one, answered StopReplica (delete);
a broker that is down is asked when it registers again, and a failed answer is asked again."""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from minikafka.broker.zk.controller.topic_deletion_manager import TopicDeletionManager
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.control_plane import CONTROL_PLANE_SCHEMAS
from minikafka.protocol.errors import ErrorCode

R = CONTROL_PLANE_SCHEMAS[ApiKey.STOP_REPLICA].response[3]


def answer(partitions: list[tuple[str, int]], code: ErrorCode = ErrorCode.NONE,
           top: ErrorCode = ErrorCode.NONE) -> ApiMessage:
    return R(error_code=top, partition_errors=[R.StopReplicaPartitionError(topic_name=t, partition_index=p,
                                                                           error_code=code) for t, p in partitions])


def test_done_when_every_replica_answered_even_those_of_a_broker_that_was_down() -> None:
    deletions = TopicDeletionManager()
    assert deletions.enqueue({("a", 0): [1, 2, 3], ("a", 1): [2, 3, 1]}) == []
    asked = deletions.to_stop([1, 2])  # broker 3 is down
    assert asked == {1: [("a", 0), ("a", 1)], 2: [("a", 0), ("a", 1)]}
    assert deletions.to_stop([1, 2]) == {}  # asked once while unanswered
    assert deletions.on_stop_replica_response(1, answer(asked[1])) == []
    assert deletions.on_stop_replica_response(2, answer(asked[2])) == []
    assert deletions.topics == ["a"]
    assert deletions.to_stop([1, 2, 3]) == {3: [("a", 0), ("a", 1)]}
    assert deletions.on_stop_replica_response(3, answer([("a", 0)])) == []
    assert deletions.on_stop_replica_response(3, answer([("a", 1)])) == ["a"]


def test_a_failed_answer_or_a_restart_asks_again() -> None:
    deletions = TopicDeletionManager()
    deletions.enqueue({("b", 0): [1]})
    assert deletions.to_stop([1]) == {1: [("b", 0)]}
    assert deletions.on_stop_replica_response(1, answer([("b", 0)], top=ErrorCode.STALE_BROKER_EPOCH)) == []
    assert deletions.on_stop_replica_response(1, answer([("b", 0)], code=ErrorCode.KAFKA_STORAGE_ERROR)) == []
    assert deletions.to_stop([1]) == {1: [("b", 0)]}
    deletions.broker_restarted(1)  # the request went to its old registration, unanswered
    assert deletions.to_stop([1]) == {1: [("b", 0)]}
    assert deletions.on_stop_replica_response(1, answer([("b", 0)])) == ["b"]
    deletions.forget("b")
    assert deletions.topics == [] and deletions.to_stop([1]) == {}


def test_a_topic_whose_replicas_are_all_gone_is_done_at_once() -> None:
    assert TopicDeletionManager().enqueue({("c", 0): []}) == ["c"]
