"""A broker log directory: meta.properties, the broker-level checkpoints, partition directories.

Layout as in Kafka (KRaft mode), so Kafka's tools and habits apply:
`meta.properties`, `recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
`log-start-offset-checkpoint` and one `<topic>-<partition>` directory per partition, and the `.lock` file whose
lock the node using the directory holds.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import NamedTuple

from .checkpoint import atomic_write, parse_java_int, read_offset_checkpoint, write_offset_checkpoint
from .errors import KafkaStorageError
from .file_lock import FileLock
from .partition_metadata import random_uuid, uuid_from_str, uuid_to_str
from .properties import parse_properties

logger = logging.getLogger(__name__)

META_PROPERTIES = "meta.properties"
LOCK_FILE_NAME = ".lock"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
META_PROPERTIES_VERSION = 1
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_IGNORED_DIR_SUFFIXES = ("-delete", "-future", "-stray")
# Kafka's DirectoryId.UNASSIGNED, LOST and MIGRATING: never the id of a real directory.
RESERVED_DIRECTORY_IDS = (bytes(16), bytes(15) + b"\x01", bytes(15) + b"\x02")
# DirectoryId.LOST: where AssignReplicasToDirs places replicas whose log dir failed.
LOST_DIRECTORY_ID = uuid.UUID(bytes=RESERVED_DIRECTORY_IDS[1])

OffsetMap = dict[tuple[str, int], int]


def validate_topic_name(name: str) -> str | None:
    """Kafka's error message for an illegal topic name, or None if `name` is legal."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) for a `<topic>-<partition>` directory name, else None.

    Topic names may contain '-', so the split is at the last one. Directories of deleted,
    future (being moved) and stray partitions are not partitions of this directory.
    """
    if name.endswith(_IGNORED_DIR_SUFFIXES):
        return None
    topic, sep, partition = name.rpartition("-")
    if not sep or not partition.isdigit() or validate_topic_name(topic) is not None:
        return None
    return topic, int(partition)


def lock_log_dir(directory: Path) -> FileLock:
    """The lock of a log dir or metadata log dir (Kafka's LogManager.lockLogDirs), the dir created if missing.

    Taken before anything in the dir is read or written and held while the node runs, so that a second broker or
    controller given the same dir refuses to start instead of recovering, truncating and checkpointing files the
    first one is writing. KafkaStorageError with Kafka's message when another process or thread holds it.
    """
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise KafkaStorageError(f"Cannot create log directory {directory}: {e}") from e
    lock = FileLock(directory / LOCK_FILE_NAME)
    try:
        locked = lock.try_lock()
    except OSError as e:
        raise KafkaStorageError(f"Disk error while locking directory {directory}: {e}") from e
    if not locked:
        raise KafkaStorageError(f"Failed to acquire lock on file {LOCK_FILE_NAME} in {directory}. A Kafka instance "
                                "in another process or thread is using this directory.")
    return lock


def lock_log_dirs(directories: Iterable[Path]) -> ExitStack:
    """The locks of every dir, all or none (those taken are released when one fails); closing the returned stack
    releases them."""
    with ExitStack() as locks:
        for directory in directories:
            locks.enter_context(lock_log_dir(directory))
        return locks.pop_all()


class MetaProperties(NamedTuple):
    """What meta.properties says: the cluster and node a log directory belongs to, and the directory's own id."""

    cluster_id: str
    node_id: int
    directory_id: str  # empty when the file has none yet


def read_meta_properties(path: Path) -> MetaProperties | None:
    """The content of a meta.properties file, None if there is none; ValueError naming the file and what is wrong
    where Kafka would refuse to start with it (MetaProperties.Builder, MetaPropertiesEnsemble.verify and
    KafkaRaftServer's checks). Read as Java's Properties.load reads a stream: ISO 8859-1, so any bytes are text."""
    try:
        text = path.read_bytes().decode("latin-1")
    except FileNotFoundError:
        return None
    try:
        return _meta_properties(parse_properties(text), path.parent)
    except ValueError as e:
        raise ValueError(f"Error while reading meta.properties file {path}: {e}") from None


def _meta_properties(props: dict[str, str], directory: Path) -> MetaProperties:
    raw_version = props.get("version", "0")
    try:
        version = parse_java_int(raw_version, 32)
    except ValueError:
        raise ValueError(f"invalid version string {raw_version!r}") from None
    if version not in (0, 1):
        raise ValueError(f"unknown version number {version}")
    node_key = "node.id" if version == 1 else "broker.id"  # a version 0 file (ZooKeeper era) names the node so
    raw_node = props.get(node_key)
    if raw_node is None:
        raise ValueError(f"node ID not found (a version {version} file names it {node_key})")
    try:
        node_id = parse_java_int(raw_node, 32)
    except ValueError:
        raise ValueError(f"failed to parse {node_key} {raw_node!r} as an int") from None
    cluster_id = props.get("cluster.id")
    if not cluster_id:
        raise ValueError("cluster.id was not found")
    directory_id = props.get("directory.id", "")
    if directory_id:
        try:
            raw_id = uuid_from_str(directory_id)
        except ValueError as e:
            raise ValueError(f"unable to read directory.id as a Uuid: {e}") from None
        if raw_id in RESERVED_DIRECTORY_IDS:
            raise ValueError(f"invalid reserved directory ID {directory_id} found in {directory}")
    return MetaProperties(cluster_id, node_id, directory_id)


def _write_meta_properties(path: Path, meta: MetaProperties) -> None:
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    props = {"cluster.id": meta.cluster_id, "directory.id": meta.directory_id, "node.id": str(meta.node_id),
             "version": str(META_PROPERTIES_VERSION)}
    text = "#\n#" + stamp + "\n" + "".join(f"{key}={value}\n" for key, value in props.items())
    atomic_write(path, text.encode("utf-8"))


class LogDir:
    """One log directory of a broker (`log.dirs` entry); created if missing."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise KafkaStorageError(f"Cannot create log directory {self.path}: {e}") from e

    # ----------------------------------------------------------------- meta.properties

    def load_or_create_meta(self, node_id: int, cluster_id: str | None) -> tuple[str, str]:
        """(cluster id, directory id) of this directory.

        A directory without meta.properties is formatted, as `kafka-storage.sh format` would: the file gets
        `cluster_id` (generated when None) and a new directory id. An existing file is checked as Kafka checks it
        on start (MetaPropertiesEnsemble), and only a missing directory.id is added to it. ValueError, naming the
        file and what is wrong, when it cannot be used: unreadable content, or another node's or cluster's.
        """
        path = self.path / META_PROPERTIES
        meta = read_meta_properties(path)
        if meta is None:
            meta = MetaProperties(cluster_id or uuid_to_str(random_uuid()), node_id, uuid_to_str(random_uuid()))
            _write_meta_properties(path, meta)
            return meta.cluster_id, meta.directory_id
        if meta.node_id != node_id:
            raise ValueError(f"Stored node id {meta.node_id} in {path} doesn't match the node id {node_id}. If you "
                             "moved your data, make sure your configured node id matches; to create a new node, "
                             "remove all data in its data directories")
        if cluster_id is not None and meta.cluster_id != cluster_id:
            raise ValueError(f"The Cluster ID {cluster_id} doesn't match stored clusterId {meta.cluster_id} in "
                             f"{path}")
        if not meta.directory_id:
            meta = MetaProperties(meta.cluster_id, meta.node_id, uuid_to_str(random_uuid()))
            logger.info("Rewriting %s with a new directory.id", path)
            _write_meta_properties(path, meta)
        return meta.cluster_id, meta.directory_id

    # ----------------------------------------------------------------- checkpoints

    def read_recovery_points(self) -> OffsetMap:
        return read_offset_checkpoint(self.path / RECOVERY_POINT_CHECKPOINT)

    def write_recovery_points(self, offsets: OffsetMap) -> None:
        write_offset_checkpoint(self.path / RECOVERY_POINT_CHECKPOINT, offsets)

    def read_high_watermarks(self) -> OffsetMap:
        return read_offset_checkpoint(self.path / REPLICATION_CHECKPOINT)

    def write_high_watermarks(self, offsets: OffsetMap) -> None:
        write_offset_checkpoint(self.path / REPLICATION_CHECKPOINT, offsets)

    def read_log_start_offsets(self) -> OffsetMap:
        return read_offset_checkpoint(self.path / LOG_START_OFFSET_CHECKPOINT)

    def write_log_start_offsets(self, offsets: OffsetMap) -> None:
        write_offset_checkpoint(self.path / LOG_START_OFFSET_CHECKPOINT, offsets)

    def read_cleaner_offsets(self) -> OffsetMap:
        """Where each compacted log's next cleaning starts (its first dirty offset)."""
        return read_offset_checkpoint(self.path / CLEANER_OFFSET_CHECKPOINT)

    def write_cleaner_offsets(self, offsets: OffsetMap) -> None:
        write_offset_checkpoint(self.path / CLEANER_OFFSET_CHECKPOINT, offsets)

    # ----------------------------------------------------------------- partitions

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.path / partition_dir_name(topic, partition)

    def partition_dirs(self) -> list[tuple[str, int, Path]]:
        """(topic, partition, path) of every partition directory, sorted."""
        found = []
        for entry in self.path.iterdir():
            parsed = parse_partition_dir_name(entry.name) if entry.is_dir() else None
            if parsed is not None:
                found.append((*parsed, entry))
        return sorted(found)
