"""A broker log directory: meta.properties, the broker-level checkpoints, partition directories.

Layout as in Kafka (KRaft mode), so Kafka's tools and habits apply:
`meta.properties`, `recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
`log-start-offset-checkpoint` and one `<topic>-<partition>` directory per partition.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from .checkpoint import atomic_write, read_offset_checkpoint, write_offset_checkpoint
from .errors import KafkaStorageError
from .partition_metadata import random_uuid, uuid_to_str
from .properties import parse_properties

META_PROPERTIES = "meta.properties"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
META_PROPERTIES_VERSION = 1
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_IGNORED_DIR_SUFFIXES = ("-delete", "-future", "-stray")

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
        """(cluster id, directory id) of this directory, writing meta.properties if it has none.

        A missing cluster id is generated. Raises ValueError if the directory belongs to another
        node or another cluster.
        """
        path = self.path / META_PROPERTIES
        props = parse_properties(path.read_text(encoding="utf-8")) if path.exists() else {}
        if props:
            stored_node = props.get("node.id")
            if stored_node is not None and int(stored_node) != node_id:
                raise ValueError(f"Stored node id {stored_node} in {path} doesn't match the node id {node_id}")
            stored_cluster = props.get("cluster.id")
            if cluster_id is not None and stored_cluster is not None and stored_cluster != cluster_id:
                raise ValueError(
                    f"The Cluster ID {cluster_id} doesn't match stored clusterId {stored_cluster} in {path}")
            cluster_id = stored_cluster or cluster_id
        cluster_id = cluster_id or uuid_to_str(random_uuid())
        directory_id = props.get("directory.id") or uuid_to_str(random_uuid())
        wanted = {
            "cluster.id": cluster_id,
            "directory.id": directory_id,
            "node.id": str(node_id),
            "version": str(META_PROPERTIES_VERSION),
        }
        if any(props.get(key) != value for key, value in wanted.items()):
            stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
            text = "#\n#" + stamp + "\n" + "".join(f"{key}={value}\n" for key, value in wanted.items())
            atomic_write(path, text.encode("utf-8"))
        return cluster_id, directory_id

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
