"""A broker's copy of the cluster metadata (KRaft's broker metadata replication: the raft observer and Kafka's
MetadataLoader together).

The broker long-polls a Fetch of `__cluster_metadata-0` from the controller, over the network or, in a combined
node, in-process through the same channel. The records it gets are replayed in offset order into this broker's
own MetadataImage, and what they changed goes to the publisher (the broker server, which makes replicas leaders or
followers, applies topic configs and forgets deleted topics). Until the broker installs its publisher the image
is only built: its first publication is of the whole image.

One fetch can bring thousands of records (a topic of thousands of partitions), and the broker's other clients
must not wait for them: a large answer is decoded on a worker thread, the file work the change needs (new
partitions' logs) is done by the publisher's preparation on worker threads, and the change is then published in
parts, with other tasks run every PUBLISH_STEP_S, as Kafka's publisher works on its own thread beside the request
handlers.

The controller's answer carries its high watermark, the end of the committed log; the broker is caught up once it
has replayed to there, and `wait_for` lets a request wait until a given offset has been replayed.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import trio
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.fetch import FetchRequest

from minikafka.broker.metadata.metadata_image import MetadataChange, MetadataImage, MetadataReplayError
from minikafka.broker.network.controller_channel import ControllerChannel
from minikafka.broker.network.failure_log import FailureLog
from minikafka.broker.network.network_client import DisconnectedError
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.internal_topics import METADATA_TOPIC, METADATA_TOPIC_ID
from minikafka.protocol.metadata_records import MetadataRecordError
from minikafka.protocol.record_batch import iter_batches
from minikafka.storage.metadata_log import METADATA_PARTITION, MetadataEntry, decode_entries

log = logging.getLogger("minikafka.metadata_loader")

FETCH_VERSION = 17
FETCH_MAX_WAIT_MS = 500  # KRaft's observer fetch long-poll
FETCH_MAX_BYTES = 8 * 1024 * 1024  # one metadata batch is at most 8 MiB
FETCH_BACKOFF_S = 0.05
DECODE_OFF_LOOP_BYTES = 64 * 1024  # answers this large (about a thousand records) are decoded on a worker thread
REPLAY_STEP = 1000  # records replayed into the image per step; other tasks run between steps
# A change is published in parts of this many partitions (applying one may write a file: a leader epoch), and
# other tasks run whenever a publication has held the event loop this long.
PUBLISH_PARTITIONS = 16
PUBLISH_STEP_S = 0.01

Publisher = Callable[[MetadataImage, MetadataChange], None]
# The file work a change needs before it is published (new partitions' logs), done off the event loop.
Preparer = Callable[[MetadataImage, MetadataChange], Awaitable[None]]


class MetadataFetchError(Exception):
    """The controller answered a metadata Fetch with an error; fetching is tried again after a backoff."""


class MetadataLoader:
    def __init__(self, node_id: int, channel: ControllerChannel, image: MetadataImage | None = None,
                 max_wait_ms: int = FETCH_MAX_WAIT_MS) -> None:
        self.node_id = node_id
        self.image = image if image is not None else MetadataImage()
        self._channel = channel
        self._max_wait_ms = max_wait_ms
        self._publisher: Publisher | None = None
        self._prepare: Preparer | None = None
        # The offset the next Fetch asks for: past every batch replayed, control batches included.
        self.next_offset = 0
        # The controller's high watermark as last answered (-1 before its first answer).
        self.high_watermark = -1
        self._progress = trio.Event()  # set (and replaced) whenever next_offset or high_watermark moves

    @property
    def applied_offset(self) -> int:
        """The last metadata offset replayed, what heartbeats report (-1 before any)."""
        return self.next_offset - 1

    @property
    def caught_up(self) -> bool:
        return 0 <= self.high_watermark <= self.next_offset

    def install_publisher(self, publisher: Publisher, prepare: Preparer | None = None) -> None:
        """From now on every change goes to `publisher`, after `prepare` has done the file work it needs; the
        caller has published the image as it is."""
        self._publisher = publisher
        self._prepare = prepare

    async def wait_for(self, offset: int) -> None:
        """Until every record below `offset` (an end offset, e.g. a high watermark) has been replayed."""
        while self.next_offset < offset:
            await self._progress.wait()

    async def wait_caught_up(self) -> None:
        """Until this broker has replayed up to the controller's high watermark as first answered."""
        while not self.caught_up:
            await self._progress.wait()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fetch and replay until cancelled; a failed fetch is tried again after a short backoff."""
        task_status.started()
        failures = FailureLog(log, "metadata fetch from the controller")
        while True:
            try:
                response = await self._channel.send(self._fetch_request(self._max_wait_ms), FETCH_VERSION)
                await self._handle(response)
                failures.succeeded()
            except (DisconnectedError, MetadataFetchError) as exc:
                failures.failed(exc)
                await trio.sleep(FETCH_BACKOFF_S * min(failures.failures, 20))

    def _fetch_request(self, max_wait_ms: int, max_bytes: int = FETCH_MAX_BYTES) -> ApiMessage:
        R = FetchRequest[FETCH_VERSION]
        partition = R.FetchTopic.FetchPartition(
            partition=METADATA_PARTITION, current_leader_epoch=-1, fetch_offset=self.next_offset,
            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=max_bytes)
        return R(replica_id=self.node_id, replica_state=R.ReplicaState(replica_id=self.node_id, replica_epoch=-1),
                 max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes, isolation_level=0, session_id=0,
                 session_epoch=-1, topics=[R.FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID,
                                                         partitions=[partition])],
                 forgotten_topics_data=[], rack_id="")

    async def _handle(self, response: ApiMessage) -> None:
        if response.error_code != ErrorCode.NONE:
            raise MetadataFetchError(f"Fetch of {METADATA_TOPIC} failed: {ErrorCode(response.error_code).name}")
        data = next((p for t in response.responses for p in t.partitions
                     if p.partition_index == METADATA_PARTITION), None)
        if data is None:
            raise MetadataFetchError(f"the controller's Fetch answer has no {METADATA_TOPIC}-{METADATA_PARTITION}")
        if data.error_code != ErrorCode.NONE:
            raise MetadataFetchError(f"Fetch of {METADATA_TOPIC}-{METADATA_PARTITION} at offset {self.next_offset}"
                                     f" failed: {ErrorCode(data.error_code).name}")
        records = data.records or b""
        if records:
            await self._replay(records)
        if data.high_watermark != self.high_watermark:
            self.high_watermark = data.high_watermark
            self._signal_progress()

    async def _replay(self, records: bytes) -> None:
        """Replay whole batches at or past next_offset, then publish what they changed as one change; next_offset
        moves (and waiters wake) once it is published."""
        change = MetadataChange()
        end = self.next_offset
        try:
            if len(records) >= DECODE_OFF_LOOP_BYTES:
                entries = await trio.to_thread.run_sync(_entries_from, records, self.next_offset)
            else:
                entries = _entries_from(records, self.next_offset)
            for i, entry in enumerate(entries):
                if i and i % REPLAY_STEP == 0:
                    await trio.lowlevel.checkpoint()
                replayed = self.image.replay(entry.record, entry.offset, entry.controller_epoch)
                if replayed is not None:
                    change.merge(replayed)
        except (MetadataRecordError, MetadataReplayError) as exc:
            # The image no longer matches the controller's: serving on would answer wrong metadata.
            raise RuntimeError(f"broker {self.node_id} cannot replay the cluster metadata: {exc}") from exc
        for _position, header in iter_batches(records):
            end = max(end, header.last_offset + 1)
        if end == self.next_offset:
            raise MetadataFetchError(f"the controller answered offset {self.next_offset} with no whole batch")
        if self._publisher is not None:
            await self._publish(self._publisher, change)
        self.next_offset = end
        self._signal_progress()

    async def _publish(self, publisher: Publisher, change: MetadataChange) -> None:
        """Hand `change` to the publisher in parts. A failure propagates and stops the broker: a change applied in
        part leaves the broker's state matching no metadata image, and serving on would answer wrong metadata."""
        if self._prepare is not None:
            await self._prepare(self.image, change)
        step_began = time.monotonic()
        for part in change.parts(PUBLISH_PARTITIONS):
            if time.monotonic() - step_began >= PUBLISH_STEP_S:
                await trio.lowlevel.checkpoint()
                step_began = time.monotonic()
            publisher(self.image, part)

    def _signal_progress(self) -> None:
        self._progress.set()
        self._progress = trio.Event()

    async def controller_high_watermark(self, channel: ControllerChannel) -> int:
        """Ask the controller for the end of its committed log now (a Fetch that does not wait), so a caller can
        wait for this broker to replay a change the controller has just answered for. `channel` is not the
        loader's own, whose connection a long poll may hold."""
        response = await channel.send(self._fetch_request(0, max_bytes=1), FETCH_VERSION)
        if response.error_code != ErrorCode.NONE:
            raise MetadataFetchError(f"Fetch of {METADATA_TOPIC} failed: {ErrorCode(response.error_code).name}")
        for topic in response.responses:
            for p in topic.partitions:
                if p.partition_index == METADATA_PARTITION and p.error_code == ErrorCode.NONE:
                    return int(p.high_watermark)
        raise MetadataFetchError(f"the controller's Fetch answer has no {METADATA_TOPIC}-{METADATA_PARTITION}")


class LoaderCatchUp:
    """A KRaft broker's catch-up with its controller (what its forwarded requests wait for): ask the controller for
    its committed offset, wait until the loader replayed it."""

    def __init__(self, channel: ControllerChannel, loader: MetadataLoader, metadata_wait_ms: int) -> None:
        self._channel = channel
        self._loader = loader
        self._metadata_wait_s = metadata_wait_ms / 1000

    async def __call__(self) -> bool:
        """Whether this broker's metadata holds what the controller has committed now, within the wait."""
        with trio.move_on_after(self._metadata_wait_s):
            try:
                high_watermark = await self._loader.controller_high_watermark(self._channel)
            except (DisconnectedError, MetadataFetchError) as exc:
                log.info("cannot learn the controller's metadata offset: %s", exc)
                return False
            await self._loader.wait_for(high_watermark)
            return True
        log.info("metadata did not catch up with the controller within %.1f s", self._metadata_wait_s)
        return False


def _entries_from(records: bytes, offset: int) -> list[MetadataEntry]:
    """The metadata records at or past `offset` (a batch that begins before the offset asked for comes whole)."""
    return [entry for entry in decode_entries(records, METADATA_TOPIC) if entry.offset >= offset]
