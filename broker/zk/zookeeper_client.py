"""The ZooKeeper session of a trio program (Kafka's ZooKeeperClient), on kazoo: connection, session expiry,
watches and pipelined requests, below the znode operations of KafkaZkClient.

kazoo runs its own threads. Requests go out through its asynchronous API and their completions come back into
the trio loop (`TrioToken.run_sync_soon`, which never blocks kazoo's threads), so a batch of reads over many
partitions is pipelined on one connection and no worker thread waits on ZooKeeper. A request that fails because
the connection dropped is sent again once connected, as Kafka's retryRequestsUntilConnected does; such a write may
have been applied already, which the callers handle as Kafka's do (a NODEEXISTS or BADVERSION on the retry).

Watches are one-shot, as in ZooKeeper: a read with `watch=True` arms one, and its firing is delivered to every
`subscribe()`d channel as a ZkEvent. Session changes are delivered the same way. kazoo drops its watches when the
connection drops (it does not restore them on reconnect as ZooKeeper's Java client does), so this client arms
them again on reconnection and sends the event of whatever changed meanwhile: a consumer never loses a change.
After a session expiry `after_initializing_session` runs (KafkaZkClient registers the broker again) before
NEW_SESSION is sent.
"""
from __future__ import annotations

import enum
import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Self

import trio
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionLoss, KazooException, NoNodeError, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat

log = logging.getLogger("minikafka.zk_client")

DEFAULT_SESSION_TIMEOUT_MS = 18000  # Kafka's zookeeper.session.timeout.ms
RETRY_BACKOFF_S = 0.01  # before a request lost with its connection goes out again
RECONNECT_MAX_DELAY_S = 1.0  # between kazoo's connection attempts while ZooKeeper is unreachable


def _quiet_kazoo() -> None:
    """kazoo logs each connection and session change at INFO ("Connecting to 127.0.0.1:2181", "Zookeeper connection
    established"), which this client reports already in a broker's words; below minikafka's DEBUG, kazoo says only
    warnings and errors. A level set for kazoo by whoever configured logging is kept."""
    kazoo = logging.getLogger("kazoo")
    if kazoo.level == logging.NOTSET and not log.isEnabledFor(logging.DEBUG):
        kazoo.setLevel(logging.WARNING)



class ZooKeeperClientTimeoutError(Exception):
    """No connection to ZooKeeper within zookeeper.connection.timeout.ms. Not a KafkaError: it never reaches a
    client, it stops the broker starting (as Kafka's ZooKeeperClientTimeoutException does)."""


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


_DATA, _CHILDREN = "data", "children"  # the two kinds of watch on a znode
_UNKNOWN = object()  # the state a lost watch was armed on, when it is not known


def _outcome(result: IAsyncResult) -> Any:
    """A completed request's value, or the exception it failed with."""
    exception = result.exception
    return exception if exception is not None else result.value



def raise_if_failed(outcome: Any) -> Any:
    """A request's value, raising the exception it failed with."""
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


class ZooKeeperClient:
    """`ZooKeeperClient.open(config)`, or `run()` in a nursery of the caller's; every method is a coroutine of that
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

    # ---- lifecycle ----------------------------------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def open(cls, config: ZkClientConfig) -> AsyncIterator[Self]:
        """A connected client whose work runs in a nursery of this block; leaving the block closes its session."""
        client = cls(config)
        failure: Exception | None = None
        async with trio.open_nursery() as nursery:
            try:
                await nursery.start(client.run)
            except Exception as e:  # noqa: BLE001 - raised below, outside the nursery, so not wrapped in a group
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
        watches (and what `after_initializing_session` redoes) through reconnections until `aclose()` or
        cancellation, and close the session (which deletes its ephemeral znodes). ZooKeeperClientTimeoutError if it
        cannot connect within zookeeper.connection.timeout.ms."""
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
        """After a reconnection: redo what a new session needs (`after_initializing_session`), then arm the lost
        watches again."""
        while True:
            await self._resync_wakeup.wait()
            self._resync_wakeup = trio.Event()
            if self._new_session:
                self._new_session = False
                await self.after_initializing_session()
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
                _, stat = raise_if_failed(outcome)
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
        stat = raise_if_failed(await self._request(
            lambda: self._kazoo.exists_async(path, watch=self._watcher(path, _DATA) if watch else None)))
        if watch:
            self._armed[(path, _DATA)] = stat
        return stat

    async def _get_many(self, paths: Sequence[str]) -> list[tuple[bytes | None, ZnodeStat] | None]:
        """Data and stat of each znode (None where it does not exist), pipelined."""
        outcomes = await self._requests([partial(self._kazoo.get_async, p) for p in paths])
        return [None if isinstance(outcome, NoNodeError) else raise_if_failed(outcome) for outcome in outcomes]

    async def get_children(self, path: str, *, watch: bool = False) -> list[str]:
        """The znode's children ([] when it does not exist); `watch` arms a watch on them (when it exists)."""
        key = (path, _CHILDREN)
        outcome = await self._request(lambda: self._kazoo.get_children_async(
            path, watch=self._watcher(*key) if watch else None, include_data=True))
        if isinstance(outcome, NoNodeError):
            return []
        children, stat = raise_if_failed(outcome)
        if watch:
            self._armed[key] = stat
        return list(children)

    async def _wait_for_deletion(self, path: str, deadline: float) -> None:
        """Until the znode is gone (or the deadline passes, or the connection drops)."""
        gone = trio.Event()

        def on_event(_: WatchedEvent) -> None:
            self._soon(gone.set)

        stat = raise_if_failed(await self._request(lambda: self._kazoo.exists_async(path, watch=on_event)))
        if stat is not None:
            with trio.move_on_at(deadline):
                await gone.wait()

    async def after_initializing_session(self) -> None:
        """What to redo in a new session, before NEW_SESSION goes out (Kafka's StateChangeHandler): nothing here."""
