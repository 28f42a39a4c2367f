"""A small blocking Kafka client for executors: Metadata, ListOffsets and Fetch over plaintext connections.

A Python worker keeps one connection per broker and reuses it across the tasks it runs (Spark reuses Python
workers), so a task starts reading at once. Versions are agreed with ApiVersions, so the same client reads from
Apache Kafka and from minikafka. Responses are read into one buffer of their size, and a Fetch response's record
bytes are handed on as a view of that buffer, never copied per record.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass

from kafka.protocol.api_message import ApiMessage

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.schema_loading import quiet_schema_loading

from .options import FetchSettings

with quiet_schema_loading():
    from kafka.protocol.consumer import ListOffsetsRequest
    from kafka.protocol.consumer.fetch import FetchRequest
    from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

    from minikafka.protocol.codec import SCHEMAS

_SIZE = struct.Struct(">i")
CLIENT_SOFTWARE = ("minikafka-spark", "1")
# Versions this client speaks: topic names in Fetch (v13 uses topic ids) and the fields read below.
SPOKEN = {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (1, 12), ApiKey.LIST_OFFSETS: (1, 7), ApiKey.FETCH: (4, 12)}
LEADER_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_COORDINATOR, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.UNKNOWN_SERVER_ERROR,
})  # fmt: skip


class KafkaRequestError(Exception):
    """A broker answered a request with an error the reader cannot retry."""

    def __init__(self, code: int, what: str) -> None:
        super().__init__(f"{what}: {ErrorCode(code).name if code in ErrorCode._value2member_map_ else code}")
        self.code = code


class RetriableError(ConnectionError):
    """The leader moved, a broker went away or did not answer in time: ask for metadata and try again."""


@dataclass(frozen=True)
class FetchedPartition:
    """One partition of a Fetch response; `records` is a view into the response buffer."""

    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[tuple[int, int]]  # (producer id, first offset), None in the response becomes []
    records: memoryview


class BrokerConnection:
    """One connection to one broker: requests answered in order, one at a time."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float) -> None:
        self.address = f"{host}:{port}"
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._correlation = 0
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise RetriableError(f"cannot connect to {self.address}: {exc}") from exc
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.versions: dict[int, int] = {}
        request = ApiVersionsRequest[3](client_software_name=CLIENT_SOFTWARE[0],
                                        client_software_version=CLIENT_SOFTWARE[1])
        response = self.request(request)
        if response.error_code:
            raise KafkaRequestError(response.error_code, f"ApiVersions from {self.address}")
        for api in response.api_keys:
            spoken = SPOKEN.get(api.api_key)
            if spoken is not None and api.min_version <= spoken[1] and api.max_version >= spoken[0]:
                self.versions[api.api_key] = min(api.max_version, spoken[1])

    def version(self, api: ApiKey) -> int:
        """The highest version of `api` both sides speak (ValueError when there is none)."""
        if api not in self.versions:
            raise ValueError(f"broker {self.address} serves no version of {api.name} between {SPOKEN[api][0]} and "
                             f"{SPOKEN[api][1]}")
        return self.versions[api]

    def request(self, request: ApiMessage) -> ApiMessage:
        self.send(request)
        return self.receive(request)

    def send(self, request: ApiMessage) -> None:
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        request.with_header(correlation_id=self._correlation, client_id=self._client_id)
        try:
            self._sock.sendall(request.encode(header=True, framed=True))
        except OSError as exc:
            raise RetriableError(f"sending {type(request).__name__} to {self.address}: {exc}") from exc

    def receive(self, request: ApiMessage, timeout_s: float | None = None) -> ApiMessage:
        """The response to `request`, the last one sent."""
        frame = self._read_frame(self._timeout_s if timeout_s is None else timeout_s)
        (correlation,) = _SIZE.unpack_from(frame)
        if correlation != self._correlation:
            raise RetriableError(f"{self.address} answered request {correlation}, expected {self._correlation}")
        version = request.API_VERSION
        schema = SCHEMAS[request.API_KEY]
        return schema.response.decode(frame[4 + schema.response_header_version(version):], version=version)

    def _read_frame(self, timeout_s: float) -> memoryview:
        deadline = time.monotonic() + timeout_s
        head = memoryview(bytearray(4))
        self._read_into(head, deadline)
        (size,) = _SIZE.unpack_from(head)
        if size < 4:
            raise RetriableError(f"{self.address} sent a response frame of {size} bytes")
        frame = memoryview(bytearray(size))
        self._read_into(frame, deadline)
        return frame

    def _read_into(self, view: memoryview, deadline: float) -> None:
        done = 0
        while done < len(view):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RetriableError(f"no response from {self.address} within {self._timeout_s:g} s")
            try:
                self._sock.settimeout(remaining)
                got = self._sock.recv_into(view[done:])
            except OSError as exc:
                raise RetriableError(f"reading from {self.address}: {exc}") from exc
            if not got:
                raise RetriableError(f"{self.address} closed the connection")
            done += got

    def close(self) -> None:
        self._sock.close()


class KafkaClient:
    """Connections to the brokers of one cluster and the leaders of the partitions read, refreshed on demand."""

    def __init__(self, bootstrap_servers: str, client_id: str, timeout_s: float) -> None:
        self._bootstrap = [_host_port(s) for s in bootstrap_servers.split(",") if s.strip()]
        self._client_id = client_id
        self.timeout_s = timeout_s
        self._brokers: dict[int, tuple[str, int]] = {}
        self._leaders: dict[tuple[str, int], int] = {}
        self._connections: dict[tuple[str, int], BrokerConnection] = {}

    def _connection(self, address: tuple[str, int]) -> BrokerConnection:
        connection = self._connections.get(address)
        if connection is None:
            connection = self._connections[address] = BrokerConnection(*address, self._client_id, self.timeout_s)
        return connection

    def _any(self) -> BrokerConnection:
        """A connection to a known broker, or to a bootstrap server."""
        errors = []
        for address in [*self._connections, *self._brokers.values(), *self._bootstrap]:
            try:
                return self._connection(address)
            except RetriableError as exc:
                errors.append(str(exc))
        raise RetriableError("no broker reachable: " + "; ".join(errors))

    def refresh(self, topic: str) -> None:
        """Metadata for `topic`: the brokers and its partitions' leaders."""
        connection = self._any()
        try:
            version = connection.version(ApiKey.METADATA)
            R = MetadataRequest[version]
            request = R(topics=[R.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
            response = connection.request(request)
        except RetriableError:
            self.forget(connection)
            raise
        self._brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        for t in response.topics:
            for p in t.partitions:
                self._leaders[(t.name, p.partition_index)] = p.leader_id

    def leader(self, topic: str, partition: int) -> BrokerConnection:
        """A connection to the partition's leader as last known (metadata asked for when unknown)."""
        if self._leaders.get((topic, partition), -1) < 0:
            self.refresh(topic)
        node = self._leaders.get((topic, partition), -1)
        if node < 0 or node not in self._brokers:
            raise RetriableError(f"no leader known for {topic}-{partition}")
        return self._connection(self._brokers[node])

    def forget(self, connection: BrokerConnection | None = None, topic: str | None = None,
               partition: int | None = None) -> None:
        """Drop a broken connection and what was known of a partition's leader."""
        if connection is not None:
            for address, known in list(self._connections.items()):
                if known is connection:
                    del self._connections[address]
            connection.close()
        if topic is not None:
            self._leaders.pop((topic, partition or 0), None)

    def list_offset(self, topic: str, partition: int, timestamp: int, isolation_level: int) -> int:
        """ListOffsets at the leader: -2 the log start offset, -1 the end (HW, or LSO under read_committed)."""
        connection = self.leader(topic, partition)
        R = ListOffsetsRequest[connection.version(ApiKey.LIST_OFFSETS)]
        request = R(replica_id=-1, isolation_level=isolation_level, topics=[R.ListOffsetsTopic(
            name=topic, partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])])
        try:
            answer = connection.request(request).topics[0].partitions[0]
        except RetriableError:
            self.forget(connection, topic, partition)
            raise
        if answer.error_code in LEADER_ERRORS:
            self.forget(None, topic, partition)
            raise RetriableError(f"ListOffsets of {topic}-{partition}: {ErrorCode(answer.error_code).name}")
        if answer.error_code:
            raise KafkaRequestError(answer.error_code, f"ListOffsets of {topic}-{partition}")
        return answer.offset

    def fetch_request(self, connection: BrokerConnection, topic: str, partition: int, offset: int,
                      settings: FetchSettings) -> ApiMessage:
        R = FetchRequest[connection.version(ApiKey.FETCH)]
        return R(replica_id=-1, max_wait_ms=settings.max_wait_ms, min_bytes=settings.min_bytes,
                 max_bytes=settings.max_bytes, isolation_level=settings.isolation_level, session_id=0,
                 session_epoch=-1, forgotten_topics_data=[], rack_id="",
                 topics=[R.FetchTopic(topic=topic, partitions=[R.FetchTopic.FetchPartition(
                     partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                     log_start_offset=-1, partition_max_bytes=settings.partition_max_bytes)])])

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()


def fetched_partition(response: ApiMessage) -> FetchedPartition:
    """The one partition of a one-partition Fetch response."""
    if response.error_code:
        return FetchedPartition(response.error_code, -1, -1, -1, [], memoryview(b""))
    data = response.responses[0].partitions[0]
    records = data.records
    view = memoryview(records) if records is not None else memoryview(b"")
    aborted = [(a.producer_id, a.first_offset) for a in data.aborted_transactions or ()]
    return FetchedPartition(data.error_code, data.high_watermark, data.last_stable_offset, data.log_start_offset,
                            aborted, view)


def _host_port(server: str) -> tuple[str, int]:
    host, _, port = server.strip().rpartition(":")
    return host.strip("[]"), int(port)


_thread_clients = threading.local()


def shared_client(bootstrap_servers: str, client_id: str, timeout_s: float) -> KafkaClient:
    """The Python worker's client for a cluster: its connections outlive a task, so the next task reuses them. One
    per thread: a connection carries one request at a time, and a reader on another thread (several ranges read
    at once) must not interleave its requests with this one's or close a connection under it."""
    clients: dict[tuple[str, str, float], KafkaClient] | None = getattr(_thread_clients, "clients", None)
    if clients is None:
        clients = _thread_clients.clients = {}
    key = (bootstrap_servers, client_id, timeout_s)
    client = clients.get(key)
    if client is None:
        client = clients[key] = KafkaClient(bootstrap_servers, client_id, timeout_s)
    return client
