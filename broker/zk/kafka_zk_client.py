"""Kafka's ZooKeeper client (KafkaZkClient): the znode reads and writes the controller and the brokers make in
ZooKeeper mode, over the session, watches and pipelined requests of ZooKeeperClient.

Every controller write takes the zk version of /controller_epoch that the controller's election returned and
goes out as a multi-op with a check on it: once another controller is elected the write fails as a whole with
ControllerMovedError, so a deposed controller changes nothing. After a session expiry a registered broker is
registered again (a new broker epoch) before NEW_SESSION is sent.
"""
from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeAlias

import trio
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import ZnodeStat

from minikafka.broker.zk.zk_data import (
    BROKER_IDS_PATH,
    CLUSTER_ID_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    FEATURE_PATH,
    INITIAL_CONTROLLER_EPOCH,
    INITIAL_CONTROLLER_EPOCH_ZK_VERSION,
    MATCH_ANY_VERSION,
    PERSISTENT_PATHS,
    PRODUCER_ID_BLOCK_PATH,
    PRODUCER_ID_BLOCK_SIZE,
    TOPIC_CONFIG,
    TOPICS_PATH,
    UNKNOWN_VERSION,
    BrokerRegistration,
    ControllerRegistration,
    LeaderIsrAndControllerEpoch,
    ProducerIdsBlock,
    ReplicaAssignment,
    TopicAssignment,
    TopicPartition,
    broker_id_path,
    config_entity_path,
    decode_broker_registration,
    decode_cluster_id,
    decode_config,
    decode_controller,
    decode_controller_epoch,
    decode_feature_znode,
    decode_producer_id_block,
    decode_topic,
    decode_topic_partition_state,
    delete_topic_path,
    encode_broker_registration,
    encode_cluster_id,
    encode_config,
    encode_controller,
    encode_controller_epoch,
    encode_producer_id_block,
    encode_topic,
    encode_topic_partition_state,
    topic_partition_path,
    topic_partition_state_path,
    topic_partitions_path,
    topic_path,
)
from minikafka.broker.zk.zookeeper_client import ZkClientConfig, ZooKeeperClient, raise_if_failed
from minikafka.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("minikafka.zk_client")

# How long a broker waits for a registration left by an earlier session of its own id (a process that was killed)
# to go away with that session, in session timeouts.
PREVIOUS_REGISTRATION_WAIT_SESSIONS = 2


class ControllerMovedError(Exception):
    """A controller's write was refused because /controller_epoch moved (another controller was elected), or its
    election lost: this broker is not the controller.

    Not a KafkaError on purpose: it fences a deposed controller, which resigns, and it must pass every handler's
    `except KafkaError` so the request in hand is answered NOT_CONTROLLER whole (zk_controller_apis), as Kafka's
    getErrorResponse answers it, rather than as one partition's or topic's error."""


class TopicExistsError(KafkaError):
    """The topic's znode exists already (TOPIC_ALREADY_EXISTS)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.TOPIC_ALREADY_EXISTS, message)


@dataclass(frozen=True)
class BrokerAndEpoch:
    broker: BrokerRegistration
    epoch: int  # the czxid of its /brokers/ids/<id> znode


@dataclass
class UpdateLeaderAndIsrResult:
    """Partition states written (with their new partition epoch) or failed, and those refused with BADVERSION
    (someone else updated them first: read them again and retry)."""

    finished: dict[TopicPartition, LeaderIsrAndControllerEpoch | Exception]
    partitions_to_retry: list[TopicPartition]


# One write of a batch; `_write` sends each alone or, for a controller, in a multi-op behind the epoch check.
@dataclass(frozen=True)
class _Create:
    path: str
    data: bytes
    ephemeral: bool = False
    sequential: bool = False  # only in `multi`


@dataclass(frozen=True)
class _SetData:
    path: str
    data: bytes
    version: int = MATCH_ANY_VERSION


@dataclass(frozen=True)
class _Delete:
    path: str
    version: int = MATCH_ANY_VERSION


_Write = _Create | _SetData | _Delete
# The writes a controller puts in one `multi`.
CreateOp, SetDataOp, DeleteOp = _Create, _SetData, _Delete
ZkWrite: TypeAlias = _Create | _SetData | _Delete


def _multi_op_failure(results: Sequence[Any]) -> Exception | None:
    """The error that failed a multi-op (the others only report they were rolled back), None if it succeeded."""
    errors = [r for r in results if isinstance(r, Exception)]
    causes = [e for e in errors if not isinstance(e, (RolledBackError, RuntimeInconsistency))]
    if causes:
        return causes[0]
    return errors[0] if errors else None



class KafkaZkClient(ZooKeeperClient):
    """`KafkaZkClient.open(config)`, or `run()` in a nursery of the caller's; every method is a coroutine of that
    trio loop."""

    def __init__(self, config: ZkClientConfig) -> None:
        super().__init__(config)
        self._broker_registration: BrokerRegistration | None = None
        self.broker_epoch = -1  # the czxid of this broker's registration, once registered
    async def after_initializing_session(self) -> None:
        """Register the broker again in the new session (a new broker epoch)."""
        if self._broker_registration is not None:
            try:
                await self.register_broker(self._broker_registration)
            except Exception:  # the session's other handlers still run; Kafka logs this and carries on too
                log.exception("Failed to register broker %d again in the new ZooKeeper session",
                              self._broker_registration.broker_id)

    # ---- controller-epoch-checked writes ------------------------------------------------------------------------

    def _start_write(self, op: _Write, expected_controller_epoch_zk_version: int) -> IAsyncResult:
        if expected_controller_epoch_zk_version == MATCH_ANY_VERSION:
            if isinstance(op, _Create):
                return self._kazoo.create_async(op.path, op.data, ephemeral=op.ephemeral)
            if isinstance(op, _SetData):
                return self._kazoo.set_async(op.path, op.data, op.version)
            return self._kazoo.delete_async(op.path, op.version)
        transaction = self._kazoo.transaction()
        transaction.check(CONTROLLER_EPOCH_PATH, expected_controller_epoch_zk_version)
        if isinstance(op, _Create):
            transaction.create(op.path, op.data, ephemeral=op.ephemeral)
        elif isinstance(op, _SetData):
            transaction.set_data(op.path, op.data, op.version)
        else:
            transaction.delete(op.path, op.version)
        return transaction.commit_async()

    async def _write(self, ops: Sequence[_Write], expected_controller_epoch_zk_version: int) -> list[Any]:
        """Pipelined writes; each one's value (created path, new stat, True for a delete) or exception.

        With a controller epoch zk version (not MATCH_ANY_VERSION) each write is a multi-op that first checks
        /controller_epoch is at that version: ControllerMovedError (and nothing written) if it is not."""
        if expected_controller_epoch_zk_version < MATCH_ANY_VERSION:
            raise ValueError(f"Expected controller epoch zkVersion {expected_controller_epoch_zk_version} should be "
                             f"non-negative or equal to {MATCH_ANY_VERSION}")
        outcomes = await self._requests(
            [partial(self._start_write, op, expected_controller_epoch_zk_version) for op in ops])
        if expected_controller_epoch_zk_version == MATCH_ANY_VERSION:
            return outcomes
        unwrapped = []
        for outcome in outcomes:
            check, result = raise_if_failed(outcome)
            if isinstance(check, BadVersionError):
                raise ControllerMovedError(f"Controller epoch zkVersion check fails. Expected zkVersion = "
                                           f"{expected_controller_epoch_zk_version}")
            if isinstance(check, Exception) and not isinstance(check, RolledBackError):
                raise check  # not BADVERSION: /controller_epoch is missing
            unwrapped.append(result)
        return unwrapped

    async def multi(self, ops: Sequence[_Write], expected_controller_epoch_zk_version: int) -> list[Any]:
        """All of `ops` as one transaction behind the check of /controller_epoch's version: each one's value
        (created path, new stat, True for a delete), or nothing written and ControllerMovedError when the
        controller moved, else the error of the write that failed it."""
        def start() -> IAsyncResult:
            transaction = self._kazoo.transaction()
            transaction.check(CONTROLLER_EPOCH_PATH, expected_controller_epoch_zk_version)
            for op in ops:
                if isinstance(op, _Create):
                    transaction.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequential)
                elif isinstance(op, _SetData):
                    transaction.set_data(op.path, op.data, op.version)
                else:
                    transaction.delete(op.path, op.version)
            return transaction.commit_async()

        results = raise_if_failed(await self._request(start))
        if isinstance(results[0], BadVersionError):
            raise ControllerMovedError(f"Controller epoch zkVersion check fails. Expected zkVersion = "
                                       f"{expected_controller_epoch_zk_version}")
        failure = _multi_op_failure(results)
        if failure is not None:
            raise failure
        return list(results[1:])

    # ---- generic reads and writes -------------------------------------------------------------------------------

    async def path_exists(self, path: str, *, watch: bool = False) -> bool:
        """Whether the znode exists; `watch` arms a watch for its creation, deletion and data changes (Kafka's
        registerZNodeChangeHandlerAndCheckExistence)."""
        return await self._exists(path, watch=watch) is not None

    async def existing(self, paths: Sequence[str]) -> list[str]:
        """Those of `paths` whose znodes exist, in order; the checks pipelined."""
        stats = await self._requests([partial(self._kazoo.exists_async, p) for p in paths])
        return [path for path, stat in zip(paths, stats, strict=True) if raise_if_failed(stat) is not None]

    async def get_data_and_stat(self, path: str, *, watch: bool = False) -> tuple[bytes | None, ZnodeStat | None]:
        """The znode's data and stat, (None, None) when it does not exist; `watch` as in `path_exists`."""
        if watch:
            await self._exists(path, watch=True)
        found = (await self._get_many([path]))[0]
        return found if found is not None else (None, None)

    async def get_data_and_version(self, path: str) -> tuple[bytes | None, int]:
        """The znode's data and version; (None, UNKNOWN_VERSION) when it does not exist."""
        data, stat = await self.get_data_and_stat(path)
        return data, stat.version if stat is not None else UNKNOWN_VERSION

    async def get_feature_levels(self, *, watch: bool = False) -> tuple[dict[str, int] | None, int]:
        """The features /feature finalizes and the znode's version; (None, UNKNOWN_VERSION) without it. `watch` as
        in `path_exists` (Kafka's FinalizedFeatureChangeListener)."""
        data, stat = await self.get_data_and_stat(FEATURE_PATH, watch=watch)
        if stat is None:
            return None, UNKNOWN_VERSION
        return decode_feature_znode(data), stat.version

    async def conditional_update_path(self, path: str, data: bytes, expected_version: int) -> tuple[bool, int]:
        """Set the znode's data if it is at `expected_version`: (True, new version), or (False, UNKNOWN_VERSION)
        when the version moved or the znode does not exist."""
        outcome = (await self._write([_SetData(path, data, expected_version)], MATCH_ANY_VERSION))[0]
        if isinstance(outcome, (BadVersionError, NoNodeError)):
            return False, UNKNOWN_VERSION
        return True, raise_if_failed(outcome).version

    async def create_recursive(self, path: str, data: bytes | None = None, *,
                               throw_if_path_exists: bool = True) -> None:
        """Create the znode and any missing parents (parents without data, as Kafka makes them)."""
        outcome = await self._create(path, data)
        if isinstance(outcome, NoNodeError):
            await self._create_parents(path.rpartition("/")[0])
            outcome = await self._create(path, data)
        if isinstance(outcome, NodeExistsError) and not throw_if_path_exists:
            return
        raise_if_failed(outcome)

    async def _create(self, path: str, data: bytes | None) -> Any:
        return await self._request(lambda: self._kazoo.create_async(path, data))

    async def _create_parents(self, path: str) -> None:
        if not path:
            return
        outcome = await self._create(path, None)
        if isinstance(outcome, NoNodeError):
            await self._create_parents(path.rpartition("/")[0])
            outcome = await self._create(path, None)
        if not isinstance(outcome, NodeExistsError):
            raise_if_failed(outcome)

    async def make_sure_persistent_path_exists(self, path: str) -> None:
        await self.create_recursive(path, throw_if_path_exists=False)

    async def create_top_level_paths(self) -> None:
        """The persistent paths every broker makes sure of at start."""
        for path in PERSISTENT_PATHS:
            await self.make_sure_persistent_path_exists(path)

    async def delete_recursive(self, path: str,
                               expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION) -> bool:
        """Delete the znode and everything under it; False if it did not exist."""
        outcome = await self._request(lambda: self._kazoo.get_children_async(path))
        if isinstance(outcome, NoNodeError):
            return False
        for child in raise_if_failed(outcome):
            await self.delete_recursive(f"{path}/{child}", expected_controller_epoch_zk_version)
        result = (await self._write([_Delete(path)], expected_controller_epoch_zk_version))[0]
        if isinstance(result, NotEmptyError):  # a child appeared meanwhile
            return await self.delete_recursive(path, expected_controller_epoch_zk_version)
        if not isinstance(result, NoNodeError):
            raise_if_failed(result)
        return True

    # ---- cluster id ---------------------------------------------------------------------------------------------

    async def get_cluster_id(self) -> str | None:
        data, _ = await self.get_data_and_stat(CLUSTER_ID_PATH)
        return decode_cluster_id(data) if data is not None else None

    async def create_or_get_cluster_id(self, proposed_cluster_id: str) -> str:
        """The cluster's id: the proposed one if this call created it, the existing one otherwise."""
        try:
            await self.create_recursive(CLUSTER_ID_PATH, encode_cluster_id(proposed_cluster_id))
            return proposed_cluster_id
        except NodeExistsError:
            cluster_id = await self.get_cluster_id()
            if cluster_id is None:
                raise RuntimeError(f"Failed to get cluster id from ZooKeeper: {CLUSTER_ID_PATH} was deleted") from None
            return cluster_id

    # ---- brokers ------------------------------------------------------------------------------------------------

    async def register_broker(self, registration: BrokerRegistration) -> int:
        """Create this broker's ephemeral /brokers/ids/<id> and return the broker epoch (its czxid). The broker is
        registered again, under a new epoch, whenever its session expires.

        A registration left by an expired session of this client is replaced; one left by another session (this
        broker's previous process, killed) is waited out until that session expires, up to two session timeouts
        (NodeExistsError after that: another live broker has this id)."""
        self._broker_registration = registration
        path = broker_id_path(registration.broker_id)
        data = encode_broker_registration(registration, int(time.time() * 1000))
        stat = await self._checked_ephemeral_create(path, data)
        self.broker_epoch = stat.czxid
        log.info("Registered broker %d at path %s with addresses: %s, czxid (broker epoch): %d",
                 registration.broker_id, path, ",".join(e.connection_string for e in registration.endpoints),
                 stat.czxid)
        return stat.czxid

    async def _checked_ephemeral_create(self, path: str, data: bytes) -> ZnodeStat:
        deadline = trio.current_time() + PREVIOUS_REGISTRATION_WAIT_SESSIONS * self.config.session_timeout_ms / 1000
        while True:
            outcome = await self._request(
                lambda: self._kazoo.create_async(path, data, ephemeral=True, include_data=True))
            if not isinstance(outcome, NodeExistsError):
                return raise_if_failed(outcome)[1]
            existing = (await self._get_many([path]))[0]
            if existing is None:
                continue  # it went away meanwhile
            owner = existing[1].ephemeralOwner
            if owner == self._session_id:
                return existing[1]  # ours: a retried create that had succeeded
            if owner in self._earlier_session_ids:
                log.info("%s is left by this client's expired session 0x%x: deleting and creating it again",
                         path, owner)
                await self._write([_Delete(path)], MATCH_ANY_VERSION)
                continue
            if trio.current_time() >= deadline:
                raise NodeExistsError(f"{path} exists, owned by session 0x{owner:x}, not this client's "
                                      f"0x{self._session_id or 0:x}")
            log.info("%s is held by session 0x%x (an earlier process of this broker, killed?); waiting up to %.0f ms "
                     "for that session to expire (zookeeper.session.timeout.ms=%d) and its registration to go",
                     path, owner, 1000 * (deadline - trio.current_time()), self.config.session_timeout_ms)
            await self._wait_for_deletion(path, deadline)

    async def get_broker(self, broker_id: int) -> BrokerRegistration | None:
        data, stat = await self.get_data_and_stat(broker_id_path(broker_id))
        return decode_broker_registration(broker_id, data) if stat is not None else None

    async def get_sorted_broker_list(self, *, watch: bool = False) -> list[int]:
        """The ids of the registered brokers; `watch` arms a watch on /brokers/ids's children."""
        return sorted(int(child) for child in await self.get_children(BROKER_IDS_PATH, watch=watch))

    async def get_all_broker_and_epochs_in_cluster(self, *, watch: bool = False) -> dict[int, BrokerAndEpoch]:
        """Every registered broker with its epoch; `watch` as in `get_sorted_broker_list`."""
        broker_ids = await self.get_sorted_broker_list(watch=watch)
        found = await self._get_many([broker_id_path(b) for b in broker_ids])
        return {broker_id: BrokerAndEpoch(decode_broker_registration(broker_id, entry[0]), entry[1].czxid)
                for broker_id, entry in zip(broker_ids, found, strict=True) if entry is not None}

    # ---- controller ---------------------------------------------------------------------------------------------

    async def get_controller_epoch(self) -> tuple[int, int] | None:
        """(controller epoch, zk version of /controller_epoch), or None before the first election."""
        data, stat = await self.get_data_and_stat(CONTROLLER_EPOCH_PATH)
        return (decode_controller_epoch(data), stat.version) if stat is not None else None

    async def get_controller_id(self, *, watch: bool = False) -> int | None:
        """The controller's broker id, None when there is none; `watch` arms a watch on /controller's creation,
        deletion and changes."""
        data, stat = await self.get_data_and_stat(CONTROLLER_PATH, watch=watch)
        return decode_controller(data).broker_id if stat is not None else None

    async def register_controller_and_increment_controller_epoch(self, controller_id: int) -> tuple[int, int]:
        """Become the controller: create the ephemeral /controller and increment /controller_epoch in one multi-op.
        Returns (new controller epoch, its zk version), which fences every later controller write; raises
        ControllerMovedError when another broker is controller or the epoch moved meanwhile."""
        current = await self.get_controller_epoch()
        if current is None:
            current = await self._maybe_create_controller_epoch_znode()
        epoch, epoch_zk_version = current
        new_epoch = epoch + 1
        registration = encode_controller(ControllerRegistration(controller_id, int(time.time() * 1000)))
        transaction_outcome = await self._request(lambda: self._election(registration, new_epoch, epoch_zk_version))
        create, set_epoch = raise_if_failed(transaction_outcome)
        if isinstance(create, NodeExistsError) or isinstance(set_epoch, BadVersionError):
            return await self._check_controller_and_epoch(controller_id, new_epoch)
        failure = _multi_op_failure([create, set_epoch])
        if failure is not None:
            raise failure
        log.info("Broker %d is the controller, epoch %d", controller_id, new_epoch)
        return new_epoch, set_epoch.version

    def _election(self, registration: bytes, new_epoch: int, expected_epoch_zk_version: int) -> IAsyncResult:
        transaction = self._kazoo.transaction()
        transaction.create(CONTROLLER_PATH, registration, ephemeral=True)
        transaction.set_data(CONTROLLER_EPOCH_PATH, encode_controller_epoch(new_epoch), expected_epoch_zk_version)
        return transaction.commit_async()

    async def _maybe_create_controller_epoch_znode(self) -> tuple[int, int]:
        outcome = await self._create(CONTROLLER_EPOCH_PATH, encode_controller_epoch(INITIAL_CONTROLLER_EPOCH))
        if not isinstance(outcome, NodeExistsError):
            raise_if_failed(outcome)
            return INITIAL_CONTROLLER_EPOCH, INITIAL_CONTROLLER_EPOCH_ZK_VERSION
        current = await self.get_controller_epoch()
        if current is None:
            raise RuntimeError(f"{CONTROLLER_EPOCH_PATH} existed before but went away while reading it")
        return current

    async def _check_controller_and_epoch(self, controller_id: int, new_epoch: int) -> tuple[int, int]:
        """After NODEEXISTS or BADVERSION: did this very election win (its reply was lost and it was retried)?"""
        current_controller = await self.get_controller_id()
        if current_controller is None:
            raise ControllerMovedError(f"{CONTROLLER_PATH} went away while checking whether the controller "
                                       "election succeeded")
        if current_controller == controller_id:
            current = await self.get_controller_epoch()
            if current is not None and current[0] == new_epoch:
                return current
        raise ControllerMovedError(f"Controller moved to broker {current_controller}")

    async def delete_controller(self, expected_controller_epoch_zk_version: int) -> None:
        """Resign: delete /controller (as the controller holding that epoch version)."""
        outcome = (await self._write([_Delete(CONTROLLER_PATH)], expected_controller_epoch_zk_version))[0]
        if not isinstance(outcome, NoNodeError):
            raise_if_failed(outcome)

    # ---- topics -------------------------------------------------------------------------------------------------

    async def get_all_topics_in_cluster(self, *, watch: bool = False) -> set[str]:
        """Every topic; `watch` arms a watch on /brokers/topics's children."""
        return set(await self.get_children(TOPICS_PATH, watch=watch))

    async def topic_exists(self, topic: str) -> bool:
        return await self.path_exists(topic_path(topic))

    async def create_topic(self, topic: str, topic_id: uuid.UUID | None, assignment: Mapping[int, Sequence[int]],
                           config: Mapping[str, str] | None = None) -> None:
        """Create a topic as Kafka's admin does in ZooKeeper mode (any broker may): its config, then its
        assignment. The controller sees the new child of /brokers/topics and creates the partition states.
        TopicExistsError if it exists."""
        if await self.topic_exists(topic):
            raise TopicExistsError(f"Topic '{topic}' already exists.")
        await self.set_or_create_entity_configs(TOPIC_CONFIG, topic, config or {})
        try:
            await self.create_recursive(topic_path(topic), encode_topic(
                topic_id, {p: ReplicaAssignment(tuple(replicas)) for p, replicas in assignment.items()}))
        except NodeExistsError:
            raise TopicExistsError(f"Topic '{topic}' already exists.") from None

    async def set_topic_assignment(self, topic: str, topic_id: uuid.UUID | None,
                                   partitions: Mapping[int, ReplicaAssignment],
                                   expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION) -> None:
        """Replace the topic's assignment (the controller adding partitions or a topic id)."""
        raise_if_failed((await self._write([_SetData(topic_path(topic), encode_topic(topic_id, partitions))],
                                            expected_controller_epoch_zk_version))[0])

    async def get_replica_assignment_and_topic_id_for_topics(self, topics: Sequence[str] | set[str]
                                                             ) -> dict[str, TopicAssignment]:
        """Each existing topic's id and assignment (pipelined)."""
        names = list(topics)
        found = await self._get_many([topic_path(t) for t in names])
        return {topic: decode_topic(topic, entry[0]) for topic, entry in zip(names, found, strict=True)
                if entry is not None}

    async def get_topic_partition_states(self, partitions: Sequence[TopicPartition]
                                         ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Each partition's state znode, its version as the partition epoch (pipelined; absent ones left out)."""
        found = await self._get_many([topic_partition_state_path(t, p) for t, p in partitions])
        return {(t, p): decode_topic_partition_state(t, p, entry[0], entry[1].version)
                for (t, p), entry in zip(partitions, found, strict=True) if entry is not None}

    async def create_topic_partition_states(self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
                                            expected_controller_epoch_zk_version: int
                                            ) -> dict[TopicPartition, Exception | None]:
        """Create the state znodes of new partitions (and their parents) as the controller: None for each one
        created, or the exception (NodeExistsError, ...) it failed with."""
        topics = list(dict.fromkeys(t for t, _ in states))
        parents = [_Create(topic_partitions_path(t), b"") for t in topics]
        parents += [_Create(topic_partition_path(t, p), b"") for t, p in states]
        for outcome in await self._write(parents, expected_controller_epoch_zk_version):
            if not isinstance(outcome, NodeExistsError):
                raise_if_failed(outcome)
        keys = list(states)
        outcomes = await self._write(
            [_Create(topic_partition_state_path(t, p), encode_topic_partition_state(states[t, p])) for t, p in keys],
            expected_controller_epoch_zk_version)
        return {key: outcome if isinstance(outcome, Exception) else None
                for key, outcome in zip(keys, outcomes, strict=True)}

    async def update_leader_and_isr(self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
                                    expected_controller_epoch_zk_version: int) -> UpdateLeaderAndIsrResult:
        """Write partition states, each conditional on its znode version being the state's partition_epoch (the
        version it was read at). ControllerMovedError if the controller epoch moved."""
        keys = list(states)
        outcomes = await self._write(
            [_SetData(topic_partition_state_path(t, p), encode_topic_partition_state(states[t, p]),
                      states[t, p].partition_epoch) for t, p in keys], expected_controller_epoch_zk_version)
        result = UpdateLeaderAndIsrResult({}, [])
        for key, outcome in zip(keys, outcomes, strict=True):
            if isinstance(outcome, BadVersionError):
                result.partitions_to_retry.append(key)
            elif isinstance(outcome, Exception):
                result.finished[key] = outcome
            else:
                result.finished[key] = replace(states[key], partition_epoch=outcome.version)
        return result

    async def delete_topic_znode(self, topic: str, expected_controller_epoch_zk_version: int) -> None:
        await self.delete_recursive(topic_path(topic), expected_controller_epoch_zk_version)

    # ---- topic deletion -----------------------------------------------------------------------------------------

    async def create_delete_topic_path(self, topic: str) -> None:
        """Mark the topic for deletion (what a DeleteTopics request does); the controller deletes it."""
        await self.create_recursive(delete_topic_path(topic))

    async def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return await self.path_exists(delete_topic_path(topic))

    async def get_topic_deletions(self, *, watch: bool = True) -> list[str]:
        """The topics marked for deletion; arms a watch on them unless `watch=False`."""
        return await self.get_children(DELETE_TOPICS_PATH, watch=watch)

    async def delete_topic_deletions(self, topics: Sequence[str], expected_controller_epoch_zk_version: int) -> None:
        """Unmark deleted topics (the last step of a deletion)."""
        for outcome in await self._write([_Delete(delete_topic_path(t)) for t in topics],
                                         expected_controller_epoch_zk_version):
            if not isinstance(outcome, NoNodeError):
                raise_if_failed(outcome)

    # ---- configs ------------------------------------------------------------------------------------------------

    async def get_entity_configs(self, entity_type: str, entity_name: str) -> dict[str, str]:
        data, _ = await self.get_data_and_stat(config_entity_path(entity_type, entity_name))
        return decode_config(entity_type, entity_name, data)

    async def get_topic_configs(self, topics: Sequence[str] | set[str]) -> dict[str, dict[str, str]]:
        """Each topic's config overrides ({} when it has none), pipelined."""
        names = list(topics)
        found = await self._get_many([config_entity_path(TOPIC_CONFIG, t) for t in names])
        return {topic: decode_config(TOPIC_CONFIG, topic, entry[0] if entry is not None else None)
                for topic, entry in zip(names, found, strict=True)}

    async def set_or_create_entity_configs(self, entity_type: str, entity_name: str,
                                           config: Mapping[str, str]) -> None:
        path = config_entity_path(entity_type, entity_name)
        data = encode_config(config)
        outcome = (await self._write([_SetData(path, data)], MATCH_ANY_VERSION))[0]
        if isinstance(outcome, NoNodeError):
            try:
                await self.create_recursive(path, data)
            except NodeExistsError:  # created meanwhile: this write wins, as Kafka's does
                outcome = (await self._write([_SetData(path, data)], MATCH_ANY_VERSION))[0]
            else:
                return
        raise_if_failed(outcome)

    async def delete_topic_configs(self, topics: Sequence[str], expected_controller_epoch_zk_version: int) -> None:
        for outcome in await self._write([_Delete(config_entity_path(TOPIC_CONFIG, t)) for t in topics],
                                         expected_controller_epoch_zk_version):
            if not isinstance(outcome, NoNodeError):
                raise_if_failed(outcome)

    # ---- producer ids -------------------------------------------------------------------------------------------

    async def allocate_producer_id_block(self, broker_id: int,
                                         block_size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdsBlock:
        """Claim the next block of producer ids for `broker_id` (Kafka's ZkProducerIdManager): read the latest
        block and write the one after it conditionally on the znode's version, again on a conflict."""
        while True:
            data, version = await self.get_data_and_version(PRODUCER_ID_BLOCK_PATH)
            if version == UNKNOWN_VERSION:
                await self.make_sure_persistent_path_exists(PRODUCER_ID_BLOCK_PATH)
                continue
            first = decode_producer_id_block(data).next_block_first_id if data else 0
            if first > 2**63 - 1 - block_size:
                raise RuntimeError("Have exhausted all producerIds.")
            block = ProducerIdsBlock(broker_id, first, block_size)
            written, _ = await self.conditional_update_path(PRODUCER_ID_BLOCK_PATH, encode_producer_id_block(block),
                                                            version)
            if written:
                log.info("Acquired new producerId block %s", block)
                return block
