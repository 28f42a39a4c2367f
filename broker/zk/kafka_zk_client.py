"""Kafka's ZooKeeper client (KafkaZkClient) for a trio program: the reads and writes the controller and the brokers
make in ZooKeeper mode, on kazoo.

kazoo runs its own threads. Requests go out through its asynchronous API and their completions come back into
the trio loop (`TrioToken.run_sync_soon`, which never blocks kazoo's threads), so a batch of reads over many
partitions is pipelined on one connection and no worker thread waits on ZooKeeper. A request that fails because
the connection dropped is sent again once connected, as Kafka's retryRequestsUntilConnected does; such a write may
have been applied already, which the callers handle as Kafka's do (a NODEEXISTS or BADVERSION on the retry).

Every controller write takes the zk version of /controller_epoch that the controller's election returned and
goes out as a multi-op with a check on it: once another controller is elected the write fails as a whole with
ControllerMovedError, so a deposed controller changes nothing.

Watches are one-shot, as in ZooKeeper: a read with `watch=True` arms one, and its firing is delivered to every
`subscribe()`d channel as a ZkEvent. Session changes are delivered the same way. kazoo drops its watches when the
connection drops (it does not restore them on reconnect as ZooKeeper's Java client does), so this client arms
them again on reconnection and sends the event of whatever changed meanwhile: a consumer never loses a change.
After a session expiry a registered broker is registered again (a new broker epoch) before NEW_SESSION is sent.
"""
from __future__ import annotations

import enum
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeAlias

import trio
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat

from minikafka.broker.zk.zk_data import (
    BROKER_IDS_PATH,
    CLUSTER_ID_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
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

log = logging.getLogger("minikafka.zk_client")

DEFAULT_SESSION_TIMEOUT_MS = 18000  # Kafka's zookeeper.session.timeout.ms
RETRY_BACKOFF_S = 0.01  # before a request lost with its connection goes out again
RECONNECT_MAX_DELAY_S = 1.0  # between kazoo's connection attempts while ZooKeeper is unreachable
# How long a broker waits for a registration left by an earlier session of its own id (a process that was killed)
# to go away with that session, in session timeouts.
PREVIOUS_REGISTRATION_WAIT_SESSIONS = 2


def _quiet_kazoo() -> None:
    """kazoo logs each connection and session change at INFO ("Connecting to 127.0.0.1:2181", "Zookeeper connection
    established"), which this client reports already in a broker's words; below minikafka's DEBUG, kazoo says only
    warnings and errors. A level set for kazoo by whoever configured logging is kept."""
    kazoo = logging.getLogger("kazoo")
    if kazoo.level == logging.NOTSET and not log.isEnabledFor(logging.DEBUG):
        kazoo.setLevel(logging.WARNING)


class ControllerMovedError(Exception):
    """A controller's write was refused because /controller_epoch moved (another controller was elected), or its
    election lost: this broker is not the controller."""


class ZooKeeperClientTimeoutError(Exception):
    """No connection to ZooKeeper within zookeeper.connection.timeout.ms."""


class TopicExistsError(Exception):
    """The topic's znode exists already."""


class ZkEventKind(enum.Enum):
    NODE_CREATED = "NodeCreated"  # a data/exists watch: the znode appeared
    NODE_DELETED = "NodeDeleted"  # a data, exists or children watch: the znode went away
    NODE_DATA_CHANGED = "NodeDataChanged"
    NODE_CHILDREN_CHANGED = "NodeChildrenChanged"
    DISCONNECTED = "Disconnected"  # the connection dropped; the session may survive (requests wait for it)
    RECONNECTED = "Reconnected"  # connected again within the same session: ephemerals and epochs still hold
    SESSION_EXPIRED = "Expired"  # the session is gone, with its ephemerals (a controller resigns)
    NEW_SESSION = "NewSession"  # a new session is up (and a registered broker registered again)


@dataclass(frozen=True)
class ZkEvent:
    kind: ZkEventKind
    path: str | None = None  # the znode of a watch event


_WATCH_EVENTS = {
    EventType.CREATED: ZkEventKind.NODE_CREATED,
    EventType.DELETED: ZkEventKind.NODE_DELETED,
    EventType.CHANGED: ZkEventKind.NODE_DATA_CHANGED,
    EventType.CHILD: ZkEventKind.NODE_CHILDREN_CHANGED,
}


@dataclass(frozen=True)
class ZkClientConfig:
    """`zookeeper.connect` (HOST:PORT[,HOST:PORT...][/chroot]) and the session and connection timeouts."""

    connect: str
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    connection_timeout_ms: int | None = None  # Kafka's default: the session timeout

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> ZkClientConfig:
        """From a broker's properties by Kafka's names."""
        connect = properties.get("zookeeper.connect")
        if not connect:
            raise ValueError("zookeeper.connect is not set")
        session = properties.get("zookeeper.session.timeout.ms")
        connection = properties.get("zookeeper.connection.timeout.ms")
        return cls(str(connect), int(str(session)) if session not in (None, "") else DEFAULT_SESSION_TIMEOUT_MS,
                   int(str(connection)) if connection not in (None, "") else None)

    @property
    def hosts(self) -> str:
        return self.connect.partition("/")[0]

    @property
    def chroot(self) -> str:
        """The chroot path ("/kafka"), or "" for none."""
        _, slash, path = self.connect.partition("/")
        return ("/" + path).rstrip("/") if slash else ""

    @property
    def effective_connection_timeout_ms(self) -> int:
        return self.connection_timeout_ms if self.connection_timeout_ms is not None else self.session_timeout_ms


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
_DATA, _CHILDREN = "data", "children"  # the two kinds of watch on a znode
_UNKNOWN = object()  # the state a lost watch was armed on, when it is not known


def _outcome(result: IAsyncResult) -> Any:
    """A completed request's value, or the exception it failed with."""
    exception = result.exception
    return exception if exception is not None else result.value


def _multi_op_failure(results: Sequence[Any]) -> Exception | None:
    """The error that failed a multi-op (the others only report they were rolled back), None if it succeeded."""
    errors = [r for r in results if isinstance(r, Exception)]
    causes = [e for e in errors if not isinstance(e, (RolledBackError, RuntimeInconsistency))]
    if causes:
        return causes[0]
    return errors[0] if errors else None


def _raise_if_failed(outcome: Any) -> Any:
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


class KafkaZkClient:
    """`KafkaZkClient.open(config)`, or `run()` in a nursery of the caller's; every method is a coroutine of that
    trio loop."""

    def __init__(self, config: ZkClientConfig) -> None:
        self.config = config
        _quiet_kazoo()
        self._kazoo = KazooClient(
            config.connect, timeout=config.session_timeout_ms / 1000,
            connection_retry={"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": RECONNECT_MAX_DELAY_S})
        self._token: trio.lowlevel.TrioToken | None = None
        self._connected = trio.Event()
        self._closing = False
        self._stopped = trio.Event()  # set by aclose()
        self._closed = trio.Event()  # set once run() closed the session
        self._session_id: int | None = None
        self._earlier_session_ids: set[int] = set()
        self._subscribers: list[trio.MemorySendChannel[ZkEvent]] = []
        self._watchers: dict[tuple[str, str], Callable[[WatchedEvent], None]] = {}
        self._armed: dict[tuple[str, str], Any] = {}  # watch -> the stat it was armed on (None: no znode)
        self._lost: dict[tuple[str, str], Any] = {}  # watches kazoo dropped with a connection, to arm again
        self._new_session = False
        self._resync_wakeup = trio.Event()
        self._broker_registration: BrokerRegistration | None = None
        self.broker_epoch = -1  # the czxid of this broker's registration, once registered

    # ---- lifecycle ----------------------------------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def open(cls, config: ZkClientConfig) -> AsyncIterator[KafkaZkClient]:
        """A connected client whose work runs in a nursery of this block; leaving the block closes its session."""
        client = cls(config)
        failure: Exception | None = None
        async with trio.open_nursery() as nursery:
            try:
                await nursery.start(client.run)
            except Exception as e:  # raised below, outside the nursery, so not wrapped in an exception group
                failure = e
            else:
                try:
                    yield client
                finally:
                    await client.aclose()
        if failure is not None:
            raise failure

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect (creating the chroot if it is missing, as Kafka does), report started, then keep the session's
        registration and watches through reconnections until `aclose()` or cancellation, and close the session
        (which deletes its ephemeral znodes). ZooKeeperClientTimeoutError if it cannot connect within
        zookeeper.connection.timeout.ms."""
        self._token = trio.lowlevel.current_trio_token()
        try:
            timeout_s = self.config.effective_connection_timeout_ms / 1000
            if self.config.chroot:
                await trio.to_thread.run_sync(self._ensure_chroot, timeout_s)
            self._kazoo.add_listener(self._on_kazoo_state)
            await trio.to_thread.run_sync(self._kazoo.start_async)
            with trio.move_on_after(timeout_s):
                await self._connected.wait()
            if not self._connected.is_set():
                raise ZooKeeperClientTimeoutError(f"Timed out waiting for connection to {self.config.connect} "
                                                  f"within {self.config.effective_connection_timeout_ms} ms")
            log.info("Connected to ZooKeeper at %s, session 0x%x", self.config.connect, self._session_id or 0)
            task_status.started()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._resync_loop)
                await self._stopped.wait()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                self._closing = True
                self._kazoo.remove_listener(self._on_kazoo_state)
                await trio.to_thread.run_sync(self._stop_kazoo)
                for channel in self._subscribers:
                    channel.close()
                self._subscribers.clear()
                self._closed.set()

    async def aclose(self) -> None:
        """Close the session (its ephemeral znodes go) and end `run()`; later requests fail."""
        self._stopped.set()
        if self._token is not None:
            await self._closed.wait()

    def _ensure_chroot(self, timeout_s: float) -> None:
        """Create the chroot path through a client without it (Kafka's createChrootIfNecessary)."""
        bootstrap = KazooClient(self.config.hosts, timeout=self.config.session_timeout_ms / 1000)
        try:
            bootstrap.start(timeout=timeout_s)
        except KazooTimeoutError:
            raise ZooKeeperClientTimeoutError(f"Timed out waiting for connection to {self.config.hosts} within "
                                              f"{self.config.effective_connection_timeout_ms} ms") from None
        try:
            if bootstrap.exists(self.config.chroot) is None:
                bootstrap.ensure_path(self.config.chroot)
                log.info("Created chroot %s in ZooKeeper at %s", self.config.chroot, self.config.hosts)
        finally:
            bootstrap.stop()
            bootstrap.close()

    def _stop_kazoo(self) -> None:
        self._kazoo.stop()
        self._kazoo.close()

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def session_id(self) -> int | None:
        """The current session's id (the ephemeralOwner of the znodes it creates)."""
        return self._session_id

    def subscribe(self) -> trio.MemoryReceiveChannel[ZkEvent]:
        """A channel of every watch and session event from now on; close it to unsubscribe."""
        send, receive = trio.open_memory_channel[ZkEvent](math.inf)
        self._subscribers.append(send)
        return receive

    # ---- from kazoo's threads into the trio loop ----------------------------------------------------------------

    def _soon(self, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn` in the trio loop, without waiting (called on kazoo's threads)."""
        assert self._token is not None
        try:
            self._token.run_sync_soon(self._guarded, fn, *args)
        except trio.RunFinishedError:
            pass

    @staticmethod
    def _guarded(fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # an exception here would crash the trio run
            log.exception("Failed to handle a ZooKeeper notification")

    def _on_kazoo_state(self, state: KazooState) -> None:
        self._soon(self._on_state, state)

    def _on_state(self, state: KazooState) -> None:
        if self._closing:
            return
        if state == KazooState.CONNECTED:
            client_id = self._kazoo.client_id
            if client_id is None:
                return  # dropped again already: its SUSPENDED or LOST follows
            session_id = client_id[0]
            if self._session_id is None:
                self._session_id = session_id
            elif session_id == self._session_id:
                log.info("Reconnected to ZooKeeper, session 0x%x", session_id)
                self._emit(ZkEvent(ZkEventKind.RECONNECTED))
            else:
                log.info("New ZooKeeper session 0x%x (the previous one, 0x%x, expired)", session_id,
                         self._session_id)
                self._earlier_session_ids.add(self._session_id)
                self._session_id = session_id
                self._new_session = True
            self._connected.set()
            self._resync_wakeup.set()
        else:
            if self._connected.is_set():
                self._connected = trio.Event()
            if state == KazooState.SUSPENDED:
                log.warning("Disconnected from ZooKeeper at %s", self.config.connect)
                self._emit(ZkEvent(ZkEventKind.DISCONNECTED))
            else:
                log.warning("ZooKeeper session 0x%x expired", self._session_id or 0)
                self._emit(ZkEvent(ZkEventKind.SESSION_EXPIRED))

    def _emit(self, event: ZkEvent) -> None:
        for channel in list(self._subscribers):
            try:
                channel.send_nowait(event)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscribers.remove(channel)

    def _watcher(self, path: str, kind: str) -> Callable[[WatchedEvent], None]:
        """The one callback of a watch: kazoo keeps a set of callbacks per znode, so arming again adds nothing."""
        key = (path, kind)
        watcher = self._watchers.get(key)
        if watcher is None:
            def watcher(event: WatchedEvent) -> None:
                self._soon(self._on_watch, key, event.type)
            self._watchers[key] = watcher
        return watcher

    def _on_watch(self, key: tuple[str, str], event_type: str) -> None:
        if self._closing:
            return
        if event_type == EventType.NONE:  # kazoo dropped the watch with its connection
            if key not in self._lost:
                self._lost[key] = self._armed.pop(key, _UNKNOWN)
            if self._connected.is_set():
                self._resync_wakeup.set()
            return
        self._armed.pop(key, None)
        self._emit(ZkEvent(_WATCH_EVENTS[event_type], key[0]))

    async def _resync_loop(self) -> None:
        """After a reconnection: register the broker again in a new session, then arm the lost watches again."""
        while True:
            await self._resync_wakeup.wait()
            self._resync_wakeup = trio.Event()
            if self._new_session:
                self._new_session = False
                if self._broker_registration is not None:
                    try:
                        await self.register_broker(self._broker_registration)
                    except Exception:
                        log.exception("Failed to register broker %d again in the new ZooKeeper session",
                                      self._broker_registration.broker_id)
                self._emit(ZkEvent(ZkEventKind.NEW_SESSION))
            while self._lost:
                key, armed_on = self._lost.popitem()
                try:
                    await self._rearm(key, armed_on)
                except KazooException:
                    log.exception("Failed to watch %s again after reconnecting to ZooKeeper", key[0])

    async def _rearm(self, key: tuple[str, str], armed_on: Any) -> None:
        """Arm a watch kazoo dropped, and send the events of what changed since it was armed."""
        path, kind = key
        events: list[ZkEventKind] = []
        if kind == _DATA:
            stat = await self._exists(path, watch=True)
            if armed_on is _UNKNOWN:
                events.append(ZkEventKind.NODE_DATA_CHANGED if stat is not None else ZkEventKind.NODE_DELETED)
            elif armed_on is None and stat is not None:
                events.append(ZkEventKind.NODE_CREATED)
            elif armed_on is not None and stat is None:
                events.append(ZkEventKind.NODE_DELETED)
            elif armed_on is not None and stat is not None:
                if stat.czxid != armed_on.czxid:
                    events += [ZkEventKind.NODE_DELETED, ZkEventKind.NODE_CREATED]
                elif stat.mzxid != armed_on.mzxid:
                    events.append(ZkEventKind.NODE_DATA_CHANGED)
        else:
            outcome = await self._request(lambda: self._kazoo.get_children_async(
                path, watch=self._watcher(path, _CHILDREN), include_data=True))
            if isinstance(outcome, NoNodeError):
                if armed_on is not None:
                    events.append(ZkEventKind.NODE_DELETED)
            else:
                _, stat = _raise_if_failed(outcome)
                self._armed[key] = stat
                if armed_on is _UNKNOWN or stat.czxid != armed_on.czxid or stat.cversion != armed_on.cversion:
                    events.append(ZkEventKind.NODE_CHILDREN_CHANGED)
        for event in events:
            self._emit(ZkEvent(event, path))

    # ---- requests -----------------------------------------------------------------------------------------------

    async def _wait_all(self, results: Sequence[IAsyncResult]) -> None:
        remaining = len(results)
        done = trio.Event()

        def completed() -> None:
            nonlocal remaining
            remaining -= 1
            if remaining == 0:
                done.set()

        for result in results:
            result.rawlink(lambda _: self._soon(completed))
        if remaining:
            await done.wait()

    async def _requests(self, starts: Sequence[Callable[[], IAsyncResult]]) -> list[Any]:
        """Send requests pipelined and return each one's value or exception. Those lost with the connection (or
        the session) are sent again once connected (Kafka's retryRequestsUntilConnected)."""
        outcomes: list[Any] = [None] * len(starts)
        pending = list(range(len(starts)))
        while pending:
            sent = [(i, starts[i]()) for i in pending]
            await self._wait_all([result for _, result in sent])
            pending = []
            for i, result in sent:
                outcome = _outcome(result)
                if isinstance(outcome, (ConnectionLoss, SessionExpiredError)) and not self._closing:
                    pending.append(i)
                else:
                    outcomes[i] = outcome
            if pending:
                await trio.sleep(RETRY_BACKOFF_S)
                await self._connected.wait()
        return outcomes

    async def _request(self, start: Callable[[], IAsyncResult]) -> Any:
        return (await self._requests([start]))[0]

    async def _exists(self, path: str, *, watch: bool = False) -> ZnodeStat | None:
        stat = _raise_if_failed(await self._request(
            lambda: self._kazoo.exists_async(path, watch=self._watcher(path, _DATA) if watch else None)))
        if watch:
            self._armed[(path, _DATA)] = stat
        return stat

    async def _get_many(self, paths: Sequence[str]) -> list[tuple[bytes | None, ZnodeStat] | None]:
        """Data and stat of each znode (None where it does not exist), pipelined."""
        outcomes = await self._requests([partial(self._kazoo.get_async, p) for p in paths])
        return [None if isinstance(outcome, NoNodeError) else _raise_if_failed(outcome) for outcome in outcomes]

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
            check, result = _raise_if_failed(outcome)
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

        results = _raise_if_failed(await self._request(start))
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
        return [path for path, stat in zip(paths, stats, strict=True) if _raise_if_failed(stat) is not None]

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

    async def get_children(self, path: str, *, watch: bool = False) -> list[str]:
        """The znode's children ([] when it does not exist); `watch` arms a watch on them (when it exists)."""
        key = (path, _CHILDREN)
        outcome = await self._request(lambda: self._kazoo.get_children_async(
            path, watch=self._watcher(*key) if watch else None, include_data=True))
        if isinstance(outcome, NoNodeError):
            return []
        children, stat = _raise_if_failed(outcome)
        if watch:
            self._armed[key] = stat
        return list(children)

    async def conditional_update_path(self, path: str, data: bytes, expected_version: int) -> tuple[bool, int]:
        """Set the znode's data if it is at `expected_version`: (True, new version), or (False, UNKNOWN_VERSION)
        when the version moved or the znode does not exist."""
        outcome = (await self._write([_SetData(path, data, expected_version)], MATCH_ANY_VERSION))[0]
        if isinstance(outcome, (BadVersionError, NoNodeError)):
            return False, UNKNOWN_VERSION
        return True, _raise_if_failed(outcome).version

    async def create_recursive(self, path: str, data: bytes | None = None, *,
                               throw_if_path_exists: bool = True) -> None:
        """Create the znode and any missing parents (parents without data, as Kafka makes them)."""
        outcome = await self._create(path, data)
        if isinstance(outcome, NoNodeError):
            await self._create_parents(path.rpartition("/")[0])
            outcome = await self._create(path, data)
        if isinstance(outcome, NodeExistsError) and not throw_if_path_exists:
            return
        _raise_if_failed(outcome)

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
            _raise_if_failed(outcome)

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
        for child in _raise_if_failed(outcome):
            await self.delete_recursive(f"{path}/{child}", expected_controller_epoch_zk_version)
        result = (await self._write([_Delete(path)], expected_controller_epoch_zk_version))[0]
        if isinstance(result, NotEmptyError):  # a child appeared meanwhile
            return await self.delete_recursive(path, expected_controller_epoch_zk_version)
        if not isinstance(result, NoNodeError):
            _raise_if_failed(result)
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
                return _raise_if_failed(outcome)[1]
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

    async def _wait_for_deletion(self, path: str, deadline: float) -> None:
        """Until the znode is gone (or the deadline passes, or the connection drops)."""
        gone = trio.Event()

        def on_event(_: WatchedEvent) -> None:
            self._soon(gone.set)

        stat = _raise_if_failed(await self._request(lambda: self._kazoo.exists_async(path, watch=on_event)))
        if stat is not None:
            with trio.move_on_at(deadline):
                await gone.wait()

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
        create, set_epoch = _raise_if_failed(transaction_outcome)
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
            _raise_if_failed(outcome)
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
            _raise_if_failed(outcome)

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
        _raise_if_failed((await self._write([_SetData(topic_path(topic), encode_topic(topic_id, partitions))],
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
                _raise_if_failed(outcome)
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
                _raise_if_failed(outcome)

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
        _raise_if_failed(outcome)

    async def delete_topic_configs(self, topics: Sequence[str], expected_controller_epoch_zk_version: int) -> None:
        for outcome in await self._write([_Delete(config_entity_path(TOPIC_CONFIG, t)) for t in topics],
                                         expected_controller_epoch_zk_version):
            if not isinstance(outcome, NoNodeError):
                _raise_if_failed(outcome)

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
