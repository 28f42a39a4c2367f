"""Opening a partition directory's segments after a start or a crash (Kafka's LogLoader).

Stray files of a half-done operation (temporary checkpoints, deleted or cleaned segments) are removed, index files
without a log are dropped, and the segments that may hold unflushed data are re-validated.

A log cleaning writes its new segment as `.cleaned` files, renames them all to `.swap`, then replaces the old
segments. Found on load (as Kafka's LogLoader does): any `.cleaned` file means the swap never began, so it and every
`.swap` file from that offset on are deleted; the remaining `.swap` log files finish their swap: the old segments
within the swap segment's offsets are deleted and the swap files renamed (its offset and time indexes are rebuilt).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from minikafka.protocol.record_batch import BatchHeader, iter_batches

from .checkpoint import TMP_SUFFIX, fsync_dir
from .index_file import CorruptIndexError
from .leader_epoch_cache import LeaderEpochCache
from .log_config import LogConfig
from .segment import LOG_SUFFIX, TXN_INDEX_SUFFIX, LogSegment, file_prefix

logger = logging.getLogger("minikafka.storage.log")

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
STRAY_SUFFIXES = (TMP_SUFFIX, ".deleted", CLEANED_SUFFIX, SWAP_SUFFIX)
_SEGMENT_FILE = re.compile(r"(\d{20})(\.log|\.index|\.timeindex|\.txnindex)")
_KEPT_SWAP_SUFFIXES = (LOG_SUFFIX + SWAP_SUFFIX, TXN_INDEX_SUFFIX + SWAP_SUFFIX)


def load_segments(directory: Path, config: LogConfig, now_ms: int, partition_name: str) -> list[LogSegment]:
    """Open every segment, finishing interrupted swaps and deleting stray temporary files and index files
    without a log."""
    _complete_swaps(directory, partition_name)
    names = os.listdir(directory)
    bases = set()
    index_files = []
    for name in names:
        if name.endswith(STRAY_SUFFIXES):
            logger.info("%s: deleting stray file %s", partition_name, name)
            (directory / name).unlink(missing_ok=True)
            continue
        match = _SEGMENT_FILE.fullmatch(name)
        if match is None:
            continue
        if match[2] == LOG_SUFFIX:
            bases.add(int(match[1]))
        else:
            index_files.append((int(match[1]), name))
    for base, name in index_files:
        if base not in bases:
            logger.info("%s: deleting index file %s, which has no log file", partition_name, name)
            (directory / name).unlink(missing_ok=True)
    return [LogSegment.open(directory, base, config, now_ms) for base in sorted(bases)]

def _complete_swaps(directory: Path, partition_name: str) -> None:
    names = os.listdir(directory)
    cleaned = [int(name[:20]) for name in names if name.endswith(CLEANED_SUFFIX) and name[:20].isdigit()]
    min_cleaned = min(cleaned, default=None)
    swaps = sorted(int(name[:20]) for name in names if name.endswith(LOG_SUFFIX + SWAP_SUFFIX) and name[:20].isdigit()
                   and (min_cleaned is None or int(name[:20]) < min_cleaned))
    for base in swaps:
        swap_log = directory / (file_prefix(base) + LOG_SUFFIX + SWAP_SUFFIX)
        data = swap_log.read_bytes()
        next_offset = base
        for _pos, header in iter_batches(data):
            next_offset = header.last_offset + 1
        logger.info("%s: completing the interrupted swap of %s (offsets %d to %d)", partition_name,
                    swap_log.name, base, next_offset)
        for name in os.listdir(directory):
            match = _SEGMENT_FILE.fullmatch(name)
            if match is not None and base <= int(match[1]) < max(next_offset, base + 1):
                (directory / name).unlink(missing_ok=True)
        for suffix in _KEPT_SWAP_SUFFIXES:
            path = directory / (file_prefix(base) + suffix)
            if path.exists():
                os.replace(path, directory / (file_prefix(base) + suffix[: -len(SWAP_SUFFIX)]))
    if swaps:
        fsync_dir(directory)


def recover_segments(segments: list[LogSegment], recovery_point: int, cache: LeaderEpochCache,
                     name: str) -> int | None:
    """Re-validate the segments that may hold unflushed data (offsets at or past `recovery_point`), and those
    whose transaction index fails its sanity check (as Kafka's LogLoader recovers them).

    After a clean shutdown the recovery point is the log end offset and nothing is scanned. Returns the base
    offset of the first segment re-validated (it and every later one need their transaction index rebuilt),
    None when none was.
    """

    def note_epoch(header: BatchHeader) -> None:
        epoch = header.partition_leader_epoch
        latest = cache.latest_epoch
        if epoch >= 0 and (latest is None or epoch > latest):
            cache.assign(epoch, header.base_offset)

    recovered_from = None
    for i, segment in enumerate(segments):
        is_last = i == len(segments) - 1
        # An earlier segment ends where the next one's name says; the last one's end is read from its tail batch,
        # which is not yet validated: only a clean end exactly at the recovery point spares it (a damaged header
        # can put its end anywhere, even below its base offset).
        if is_last:
            flushed = segment.next_offset == recovery_point and segment.ends_cleanly()
        else:
            flushed = segments[i + 1].base_offset <= recovery_point
        if flushed and _txn_index_is_sound(segment, name):
            continue
        logger.info("%s: recovering segment %s (recovery point %d)", name, segment.log_path.name, recovery_point)
        if recovered_from is None:
            recovered_from = segment.base_offset
        truncated = segment.recover(note_epoch)
        if truncated:
            logger.warning(
                "%s: truncated %d invalid bytes at the end of segment %s; the log now ends at offset %d",
                name, truncated, segment.log_path.name, segment.next_offset,
            )
        if truncated and not is_last:
            logger.warning(
                "%s: deleting %d segments after the corrupt one", name, len(segments) - i - 1
            )
            for later in segments[i + 1 :]:
                later.delete()
                later.close()
            del segments[i + 1 :]
            break
    return recovered_from


def _txn_index_is_sound(segment: LogSegment, name: str) -> bool:
    """Kafka's segment sanity check on load: a damaged transaction index is rebuilt by recovering its segment."""
    try:
        segment.txn_index.sanity_check(segment.base_offset)
    except CorruptIndexError as e:
        logger.warning("%s: found a corrupted index file corresponding to log file %s due to %s, recovering "
                       "segment and rebuilding index files...", name, segment.log_path.name, e)
        return False
    return True
