"""What a ZooKeeper-mode cluster keeps in ZooKeeper, read the way Kafka's own tools read it (kazoo, blocking).

The truth about who is controller, under which controller epoch, which brokers are live and what each partition's
state znode holds, independent of what any broker has been told: a test compares the brokers' view with it, and
finds the controller of a cluster whose old controller is paused and still believes it leads.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

DEFAULT_TIMEOUT_S = 10.0
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
DELETE_TOPICS_PATH = "/admin/delete_topics"
T = TypeVar("T")


@dataclass(frozen=True)
class ZkPartitionState:
    """A partition's state znode: what the controller last wrote (its version is the partition epoch)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    partition_epoch: int


class ZooKeeperState:
    """A read-only view of one cluster's znodes at `connect` (HOST:PORT[/chroot]); connects at the first read,
    `close()` ends the session. ZooKeeper out of reach (down, restarting) is a ConnectionError, as for a broker."""

    def __init__(self, connect: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.connect = connect
        self.timeout_s = timeout_s
        self._client: KazooClient | None = None

    def _zk(self) -> KazooClient:
        if self._client is None:
            client = KazooClient(hosts=self.connect, timeout=self.timeout_s, read_only=False)
            try:
                client.start(timeout=self.timeout_s)
            except BaseException:
                client.stop()  # it would go on trying to connect
                client.close()
                raise
            self._client = client
        return self._client

    def _read(self, read: Callable[[KazooClient], T]) -> T:
        """`read` on the client; NoNodeError passes, any other ZooKeeper failure is a ConnectionError."""
        try:
            return read(self._zk())
        except NoNodeError:
            raise
        except (KazooException, KazooTimeoutError) as exc:
            raise ConnectionError(f"ZooKeeper at {self.connect}: {exc!r}") from exc

    def _get(self, path: str) -> tuple[bytes, Any] | None:
        try:
            return self._read(lambda zk: zk.get(path))
        except NoNodeError:
            return None

    def _children(self, path: str) -> list[str]:
        try:
            return self._read(lambda zk: zk.get_children(path))
        except NoNodeError:
            return []

    def _json(self, path: str) -> dict[str, Any] | None:
        found = self._get(path)
        return json.loads(found[0]) if found is not None and found[0] else None

    def controller_id(self) -> int | None:
        """The broker /controller names, None while no broker is controller."""
        registration = self._json(CONTROLLER_PATH)
        return int(registration["brokerid"]) if registration is not None else None

    def controller_epoch(self) -> int:
        """The epoch of the latest controller elected (0 before any)."""
        found = self._get(CONTROLLER_EPOCH_PATH)
        return int(found[0]) if found is not None else 0

    def broker_ids(self) -> list[int]:
        """The brokers registered now (their ZooKeeper sessions live)."""
        return sorted(int(child) for child in self._children(BROKER_IDS_PATH))

    def broker_epoch(self, broker_id: int) -> int | None:
        """The broker's epoch: the creation id (czxid) of its registration, None while it is not registered."""
        found = self._get(f"{BROKER_IDS_PATH}/{broker_id}")
        return found[1].czxid if found is not None else None

    def topics(self) -> list[str]:
        return sorted(self._children(TOPICS_PATH))

    def topics_being_deleted(self) -> list[str]:
        return sorted(self._children(DELETE_TOPICS_PATH))

    def partition_ids(self, topic: str) -> list[int]:
        """The partitions the topic's assignment names (empty when the topic does not exist)."""
        topic_data = self._json(f"{TOPICS_PATH}/{topic}")
        return sorted(int(p) for p in (topic_data or {}).get("partitions", {}))

    def partition_state(self, topic: str, partition: int) -> ZkPartitionState | None:
        """The partition's state znode, None when it does not exist."""
        found = self._get(f"{TOPICS_PATH}/{topic}/partitions/{partition}/state")
        if found is None:
            return None
        data, stat = found
        state = json.loads(data)
        return ZkPartitionState(leader=int(state["leader"]), leader_epoch=int(state["leader_epoch"]),
                                isr=[int(r) for r in state["isr"]], controller_epoch=int(state["controller_epoch"]),
                                partition_epoch=stat.version)

    def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            try:
                client.stop()
            finally:
                client.close()
