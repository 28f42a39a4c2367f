"""Leader elections and ISR changes of one partition, as one PartitionChangeRecord (Kafka's PartitionChangeBuilder).

Every change to a partition's leader or ISR goes through here, so fencing, controlled shutdown, AlterPartition,
ElectLeaders and the leader rebalance all elect by the same rules:
- a valid leader is in the target ISR and acceptable (an active broker: registered, unfenced, not shutting down);
- ONLINE keeps the current leader while it is valid, else takes the first valid replica in assignment order;
- PREFERRED takes the first replica when valid, else keeps a valid current leader, else the next valid replica;
- UNCLEAN is ONLINE, and when no replica is valid takes the first acceptable replica outside the ISR, whose ISR
  then is that replica alone: records the ISR held may be lost, so it is logged as a warning;
- with no valid leader the partition goes offline (leader -1), keeping its last ISR: an ISR is never emptied, so
  the member that was in sync last can lead again when it returns.
A new leader (the same one included) bumps the leader epoch when the record is replayed; an ISR change alone bumps
only the partition epoch.
A reassignment (KIP-455) is carried here too: a change whose target ISR holds every target replica completes an
ongoing reassignment (replicas become the target, the ISR loses the removed replicas, adding and removing are
cleared), whichever operation made it; elections follow the target replica order; a replica list that drops a
replica bumps the leader epoch even when the leader stays, so the removed replica's fetches are fenced.
"""
from __future__ import annotations

import enum
import logging
from collections.abc import Callable

from minikafka.broker.controller.partition_reassignment_replicas import PartitionReassignmentReplicas
from minikafka.broker.metadata.metadata_image import NO_LEADER, NO_LEADER_CHANGE, PartitionInfo, TopicInfo
from minikafka.protocol.metadata_records import PartitionChangeRecord

log = logging.getLogger("minikafka.controller")

PARTITION_CHANGE_RECORD_VERSION = 0  # no directories or eligible leader replicas: the fields this image keeps


class Election(enum.Enum):
    PREFERRED = "preferred"
    ONLINE = "online"
    UNCLEAN = "unclean"


def build_partition_change(topic: TopicInfo, index: int, partition: PartitionInfo,
                           is_acceptable_leader: Callable[[int], bool], *, election: Election = Election.ONLINE,
                           target_isr: list[int] | None = None, target_replicas: list[int] | None = None,
                           target_removing: list[int] | None = None,
                           target_adding: list[int] | None = None) -> PartitionChangeRecord | None:
    """The record moving `partition` to `target_isr` (default: its ISR) and, when given, to the target replica
    lists of a reassignment, with a leader elected by `election`, or None when nothing would change."""
    isr = list(partition.isr) if target_isr is None else list(target_isr)
    reassignment = PartitionReassignmentReplicas(
        list(partition.removing_replicas if target_removing is None else target_removing),
        list(partition.adding_replicas if target_adding is None else target_adding),
        list(partition.replicas if target_replicas is None else target_replicas))
    completed = reassignment.completed(isr)
    if completed is not None:
        replicas, isr = completed
        removing: list[int] = []
        adding: list[int] = []
    else:
        replicas, removing, adding = reassignment.replicas, reassignment.removing, reassignment.adding

    def valid(replica: int) -> bool:
        return replica in isr and is_acceptable_leader(replica)

    leader, unclean = _elect(partition, replicas, election, valid, is_acceptable_leader)
    new_leader = NO_LEADER_CHANGE
    new_isr: list[int] | None = None
    if leader != partition.leader:
        new_leader = leader
        if unclean:
            log.warning("Unclean leader election for %s-%d: broker %d leads without having been in the ISR %s; "
                        "records written since it left the ISR may be lost", topic.name, index, leader,
                        partition.isr)
            new_isr = [leader]
    elif not set(partition.replicas) <= set(replicas):
        new_leader = partition.leader  # a replica leaves: a new leader epoch fences it
    if new_isr is None and isr and isr != partition.isr:
        new_isr = isr
    new_replicas = replicas if replicas and replicas != partition.replicas else None
    new_removing = removing if removing != partition.removing_replicas else None
    new_adding = adding if adding != partition.adding_replicas else None
    if (new_leader == NO_LEADER_CHANGE and new_isr is None and new_replicas is None and new_removing is None
            and new_adding is None):
        return None
    return PartitionChangeRecord(version=PARTITION_CHANGE_RECORD_VERSION, partition_id=index,
                                 topic_id=topic.topic_id, isr=new_isr, leader=new_leader, replicas=new_replicas,
                                 removing_replicas=new_removing, adding_replicas=new_adding)


def _elect(partition: PartitionInfo, replicas: list[int], election: Election, valid: Callable[[int], bool],
           acceptable: Callable[[int], bool]) -> tuple[int, bool]:
    """(leader, whether it was elected uncleanly), taking `replicas` (the target assignment) in order."""
    if election is Election.PREFERRED:
        if replicas and valid(replicas[0]):
            return replicas[0], False
        if partition.leader != NO_LEADER and valid(partition.leader):
            return partition.leader, False
        return next((r for r in replicas[1:] if valid(r)), NO_LEADER), False
    if partition.leader != NO_LEADER and valid(partition.leader):
        return partition.leader, False
    clean = next((r for r in replicas if valid(r)), None)
    if clean is not None:
        return clean, False
    if election is Election.UNCLEAN:
        unclean = next((r for r in replicas if acceptable(r)), None)
        if unclean is not None:
            return unclean, True
    return NO_LEADER, False
