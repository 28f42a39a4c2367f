"""The transaction APIs (KIP-98): InitProducerId (v0-5), AddPartitionsToTxn (v0-5), AddOffsetsToTxn (v0-4),
EndTxn (v0-5), DescribeTransactions (v0) and ListTransactions (v0-2), answered by the transaction coordinator;
WriteTxnMarkers (v1), answered by partition leaders, and DescribeProducers (v0), by any replica of a partition.
These are the ranges Kafka 4.1 advertises: InitProducerId v6 (two-phase commit, KIP-939) is still unstable there
and WriteTxnMarkers v2 came with Kafka 4.2 (KIP-1228); a client that sends them anyway is answered as v5 and v1 are.

InitProducerId: without a transactional id, an idempotent producer gets a fresh producer id at epoch 0 on every
call (the producer id and epoch a v3+ producer sends are read past, as Kafka does); with one, the coordinator of the
id answers (NOT_COORDINATOR elsewhere): a bumped epoch, INVALID_TRANSACTION_TIMEOUT for a timeout above
transaction.max.timeout.ms, CONCURRENT_TRANSACTIONS while a transaction of the id is being ended. v2+ is flexible;
v3+ carries the producer id and epoch the producer had (KIP-360; one without the other is INVALID_REQUEST); v4+
may answer PRODUCER_FENCED, which older versions get as INVALID_PRODUCER_EPOCH (KIP-588).

AddPartitionsToTxn v0-3 is the producer's: its partitions join its transaction; a topic partition that does not
exist is UNKNOWN_TOPIC_OR_PARTITION and an internal topic TOPIC_AUTHORIZATION_FAILED (offsets go through
AddOffsetsToTxn), the others of that request then OPERATION_NOT_ATTEMPTED; v0-1 get PRODUCER_FENCED as
INVALID_PRODUCER_EPOCH; v3+ is flexible. v4+ is the brokers' batched form (KIP-890 part 1): several transactional
ids per request, each either added or, with verify_only, checked (TRANSACTION_ABORTABLE for a partition not in the
transaction); an added one starts a transaction version 2 transaction (KIP-890 part 2: the client's Produce v12+ or
TxnOffsetCommit v5 needed it). AddOffsetsToTxn adds the group's `__consumer_offsets` partition. EndTxn commits or
aborts; v5 is transaction version 2: every end bumps the producer epoch (a new producer id when the epochs run out),
and the answer carries the producer id and epoch the client goes on with; a retry with the previous epoch is
answered as the first was.

WriteTxnMarkers: the coordinator asks this broker, as partition leader, to end a producer's transaction in its
partitions with a COMMIT or ABORT marker. Per marker (one producer) the partitions are appended to as acks=all with
origin COORDINATOR, waiting at most request.timeout.ms; each partition is answered with the append's error:
NOT_LEADER_OR_FOLLOWER where this broker does not lead it (the coordinator retries at the current leader),
UNKNOWN_TOPIC_OR_PARTITION where it has no replica, INVALID_PRODUCER_EPOCH for a marker of an older producer epoch
and TRANSACTION_COORDINATOR_FENCED for one from an older coordinator epoch than the partition has seen (nothing is
appended then). Once a marker is in a `__consumer_offsets` partition, the group coordinator makes the producer's
transactional offset commits there committed (or drops them). The markers of a request are all appended first,
then one wait for the ISR covers them all; the response comes when it ends. v1 is flexible. An administrator's
abort of a hanging transaction (KIP-664) is such a request, with the epochs DescribeProducers reported.

The admin APIs of KIP-664: DescribeTransactions per transactional id (TRANSACTIONAL_ID_NOT_FOUND for one the
coordinator does not know; an error leaves the other fields at the schema's defaults); ListTransactions lists the
ids this broker coordinates, filtered by state (unknown state names are echoed back), producer id, v1+ running longer
than a duration, and v2+ a transactional id regular expression matched in full, in RE2's syntax as Kafka's RE2J
(INVALID_REGULAR_EXPRESSION if it does not compile or uses what RE2 lacks), COORDINATOR_LOAD_IN_PROGRESS while
one of this broker's `__transaction_state` partitions loads; DescribeProducers gives the producers a replica (the
leader or a follower) of a partition knows, with their epochs, last sequences and the start offset of their open
transaction.

Authorization, with an authorizer, as Kafka's KafkaApis checks it, before anything else:
- InitProducerId: with a transactional id, WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent
  producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED).
- AddPartitionsToTxn v0-3: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
  partition), then WRITE on each topic (internal ones never pass): the partitions of a topic refused are
  TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED. v4+ comes from brokers: CLUSTER_ACTION on the
  cluster, else the top-level CLUSTER_AUTHORIZATION_FAILED.
- AddOffsetsToTxn: WRITE on the transactional id, then READ on the group (GROUP_AUTHORIZATION_FAILED). EndTxn:
  WRITE on the transactional id.
- WriteTxnMarkers: ALTER or CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every partition.
- DescribeTransactions: DESCRIBE per transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and only the
  topics the principal may DESCRIBE are shown; ListTransactions lists only the ids it may DESCRIBE;
  DescribeProducers: READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions).
"""
from __future__ import annotations

import re
from collections.abc import Callable

import trio
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

from minikafka.broker.clock.broker_clock import wall_clock_ms
from minikafka.broker.coordinator.coordinator_log import partition_for
from minikafka.broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from minikafka.broker.coordinator.transaction.transaction_metadata import TransactionVersion
from minikafka.broker.coordinator.transaction.transaction_state import TransactionState
from minikafka.broker.replication.delayed_produce import AppendResult
from minikafka.broker.replication.replica_manager import ReplicaManager
from minikafka.broker.security.acl import AclOperation, ResourceType
from minikafka.broker.server.broker_services import BrokerServices, RequestContext
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.end_transaction_marker import ControlRecordType, EndTransactionMarker, build_marker_batch
from minikafka.protocol.errors import DEFAULT_MESSAGES, ErrorCode, KafkaError
from minikafka.protocol.internal_topics import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from minikafka.protocol.re2_pattern import re2_pattern
from minikafka.protocol.record_batch import NO_PRODUCER_ID
from minikafka.storage.log import AppendOrigin
from minikafka.storage.log_dir import validate_topic_name
from minikafka.storage.producer_state import NO_PRODUCER_EPOCH

TopicPartition = tuple[str, int]
INTERNAL_TOPICS = frozenset((GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC))
# Versions below these get PRODUCER_FENCED as INVALID_PRODUCER_EPOCH (KIP-588): they predate the error.
INIT_PRODUCER_ID_FENCED_VERSION = 4
PRODUCER_FENCED_VERSION = 2
BATCHED_ADD_PARTITIONS_VERSION = 4
END_TXN_EPOCH_BUMP_VERSION = 5


def _coordinator(ctx: RequestContext) -> TransactionCoordinator:
    return ctx.services.transaction_coordinator


def _may_write_transactional_id(ctx: RequestContext, transactional_id: str) -> bool:
    """What a producer's every transactional request needs (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
    return ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _fenced_as(error: ErrorCode, version: int, first_version: int) -> ErrorCode:
    if error == ErrorCode.PRODUCER_FENCED and version < first_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


async def handle_init_producer_id(ctx: RequestContext, request: InitProducerIdRequest) -> ApiMessage:
    def answer(error: ErrorCode, producer_id: int = NO_PRODUCER_ID, epoch: int = NO_PRODUCER_EPOCH) -> ApiMessage:
        return ctx.response(throttle_time_ms=0, error_code=_fenced_as(error, ctx.version,
                                                                       INIT_PRODUCER_ID_FENCED_VERSION),
                            producer_id=producer_id, producer_epoch=epoch)

    # As Kafka, before anything else: WRITE on the transactional id; an idempotent producer needs IDEMPOTENT_WRITE on
    # the cluster or WRITE on some topic (Kafka's authorizeByResourceType).
    if request.transactional_id is not None:
        if not _may_write_transactional_id(ctx, request.transactional_id):
            return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif not (ctx.authorize_cluster(AclOperation.IDEMPOTENT_WRITE, log_if_denied=False)
              or ctx.authorize_by_resource_type(AclOperation.WRITE, ResourceType.TOPIC)):
        return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    expected: tuple[int, int] | None = None
    if ctx.version >= 3:
        pair = (request.producer_id, request.producer_epoch)
        if pair != (NO_PRODUCER_ID, NO_PRODUCER_EPOCH):
            if NO_PRODUCER_ID in pair[:1] or pair[1] == NO_PRODUCER_EPOCH:
                return answer(ErrorCode.INVALID_REQUEST)
            expected = pair
    if request.transactional_id is None:
        # As Kafka does for idempotent producers: every call gets a fresh producer id at epoch 0.
        try:
            return answer(ErrorCode.NONE, await ctx.services.producer_ids.generate_producer_id(), 0)
        except KafkaError as exc:
            return answer(exc.code)
    await _ensure_transaction_state_topic(ctx)
    result = await _coordinator(ctx).handle_init_producer_id(request.transactional_id,
                                                             request.transaction_timeout_ms, expected)
    return answer(result.error, result.producer_id, result.producer_epoch)


async def _ensure_transaction_state_topic(ctx: RequestContext) -> None:
    """A transactional request may come before any coordinator lookup: the coordinator's partitions come into
    being with it, as with the lookup."""
    if TRANSACTION_STATE_TOPIC not in ctx.services.metadata_cache.topics:
        await ctx.services.auto_topic_creation.create_topics([TRANSACTION_STATE_TOPIC], internal=True)


async def find_transaction_coordinator(ctx: RequestContext, transactional_id: str) -> tuple[ErrorCode, int, str, int]:
    """FindCoordinator for a transactional id: the leader of its `__transaction_state` partition, on the listener
    the request came in on; the first lookup creates the topic."""
    services = ctx.services
    cache = services.metadata_cache
    await _ensure_transaction_state_topic(ctx)
    topic = cache.topics.get(TRANSACTION_STATE_TOPIC)
    if topic is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    partition = topic.partitions.get(partition_for(transactional_id, len(topic.partitions)))
    endpoint = cache.alive_endpoint(partition.leader, ctx.conn.listener) if partition is not None else None
    if partition is None or endpoint is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return ErrorCode.NONE, partition.leader, endpoint.host, endpoint.port


async def handle_add_partitions_to_txn(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> ApiMessage:
    R = ctx.response_class
    if ctx.version >= BATCHED_ADD_PARTITIONS_VERSION and not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        # The batched versions come from brokers only; Kafka refuses the whole request.
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            results_by_transaction=[])
    if ctx.version < BATCHED_ADD_PARTITIONS_VERSION:
        transactions = [(request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                         request.v3_and_below_producer_epoch, False, request.v3_and_below_topics)]
    else:
        transactions = [(t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only, t.topics)
                        for t in request.transactions]
    results = []
    for transactional_id, producer_id, producer_epoch, verify_only, topics in transactions:
        if transactional_id is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Transactional ID can not be null in request.")
        partitions = {(t.name, p) for t in topics for p in t.partitions}
        errors = await _add_partitions(ctx, transactional_id, producer_id, producer_epoch, verify_only, partitions)
        by_topic: dict[str, list] = {}
        for (topic, index), code in sorted(errors.items()):
            by_topic.setdefault(topic, []).append(R.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult(
                partition_index=index, partition_error_code=code))
        results.append((transactional_id, [R.AddPartitionsToTxnTopicResult(name=name, results_by_partition=parts)
                                           for name, parts in by_topic.items()]))
    if ctx.version < BATCHED_ADD_PARTITIONS_VERSION:
        return ctx.response(throttle_time_ms=0, results_by_topic_v3_and_below=results[0][1])
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=[
        R.AddPartitionsToTxnResult(transactional_id=txn_id, topic_results=topic_results)
        for txn_id, topic_results in results])


async def _add_partitions(ctx: RequestContext, transactional_id: str, producer_id: int, producer_epoch: int,
                          verify_only: bool, partitions: set[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    # A producer's request (v0-3) needs WRITE on the transactional id, then on each topic: an internal topic is
    # never authorized, as Kafka leaves them out of the check.
    from_client = ctx.version < BATCHED_ADD_PARTITIONS_VERSION
    if from_client and not _may_write_transactional_id(ctx, transactional_id):
        return dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    topics = ctx.services.metadata_cache.topics
    unwritable: set[str] = set()
    if from_client:
        unwritable = {topic for topic in {topic for topic, _ in partitions}
                      if topic in INTERNAL_TOPICS or not ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, topic)}
    refused: dict[TopicPartition, ErrorCode] = {}
    for tp in partitions:
        if tp[0] in unwritable:
            refused[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif tp[0] not in topics or tp[1] not in topics[tp[0]].partitions:
            refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if refused:
        return {tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in partitions}
    coordinator = _coordinator(ctx)
    if verify_only:
        return coordinator.handle_verify_partitions_in_transaction(transactional_id, producer_id, producer_epoch,
                                                                   partitions)
    # v4+ comes from a leader adding partitions for a transaction version 2 client (Kafka's
    # transactionVersionForAddPartitionsToTxn).
    client_version = (TransactionVersion.TV_2 if ctx.version >= BATCHED_ADD_PARTITIONS_VERSION
                      else TransactionVersion.TV_0)
    error = await coordinator.handle_add_partitions_to_transaction(transactional_id, producer_id, producer_epoch,
                                                                   partitions, client_version)
    return dict.fromkeys(partitions, _fenced_as(error, ctx.version, PRODUCER_FENCED_VERSION))


async def handle_add_offsets_to_txn(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> ApiMessage:
    if not _may_write_transactional_id(ctx, request.transactional_id):
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    num_partitions = ctx.services.config.get("offsets.topic.num.partitions")
    offsets_topic = ctx.services.metadata_cache.topics.get(GROUP_METADATA_TOPIC)
    if offsets_topic is not None:
        num_partitions = len(offsets_topic.partitions)
    tp = (GROUP_METADATA_TOPIC, partition_for(request.group_id, num_partitions))
    error = await _coordinator(ctx).handle_add_partitions_to_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, {tp}, TransactionVersion.TV_0)
    return ctx.response(throttle_time_ms=0, error_code=_fenced_as(error, ctx.version, PRODUCER_FENCED_VERSION))


async def handle_end_txn(ctx: RequestContext, request: EndTxnRequest) -> ApiMessage:
    if not _may_write_transactional_id(ctx, request.transactional_id):
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                            producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH)
    version = TransactionVersion.TV_2 if ctx.version >= END_TXN_EPOCH_BUMP_VERSION else TransactionVersion.TV_0
    result = await _coordinator(ctx).handle_end_transaction(request.transactional_id, request.producer_id,
                                                            request.producer_epoch, request.committed, version)
    return ctx.response(throttle_time_ms=0, error_code=_fenced_as(result.error, ctx.version, PRODUCER_FENCED_VERSION),
                        producer_id=result.producer_id, producer_epoch=result.producer_epoch)


async def handle_write_txn_markers(ctx: RequestContext, request: WriteTxnMarkersRequest) -> ApiMessage:
    # As Kafka: ALTER on the cluster (an administrator aborting a hanging transaction, KIP-664) or else
    # CLUSTER_ACTION (a transaction coordinator's broker); without either every partition is refused.
    if not (ctx.authorize_cluster(AclOperation.ALTER, log_if_denied=False)
            or ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)):
        return _markers_response(ctx.response_class, request, [
            {(t.name, index): ErrorCode.CLUSTER_AUTHORIZATION_FAILED for t in marker.topics
             for index in t.partition_indexes} for marker in request.markers])
    answers = await _write_markers(ctx.services, request, ctx.client, ctx.draining)
    return _markers_response(ctx.response_class, request, answers)


async def write_markers_locally(services: BrokerServices, request: WriteTxnMarkersRequest) -> ApiMessage:
    """The transaction coordinator's markers for the partitions this broker leads, written as WriteTxnMarkers
    writes them but without a trip through its own socket: the coordinator's broker answers its own markers first
    rather than after its other work, and a commit does not wait on its slowest hop for a third of its markers."""
    answers = await _write_markers(services, request, None, None)
    return _markers_response(WriteTxnMarkersResponse[request.API_VERSION], request, answers)


async def _write_markers(services: BrokerServices, request: WriteTxnMarkersRequest,
                         client: trio.SocketStream | None, stop_early: Callable[[], bool] | None,
                         ) -> list[dict[TopicPartition, ErrorCode]]:
    """Every marker is appended first, then one wait until the ISR has them all: a request carrying the markers of
    many transactions costs one replication round trip, not one per marker."""
    replica_manager = services.replica_manager
    timeout_ms = services.config.get("request.timeout.ms")
    answers: list[dict[TopicPartition, ErrorCode]] = [{} for _ in request.markers]
    appended: list[dict[TopicPartition, AppendResult]] = []
    now_ms = wall_clock_ms()
    for i, marker in enumerate(request.markers):
        entries = _marker_batches(replica_manager, marker, now_ms, answers[i])
        appended.append(replica_manager.append_to_local_log(-1, entries, AppendOrigin.COORDINATOR) if entries else {})
    replicated = await _wait_for_markers_replicated(replica_manager, timeout_ms, appended, client, stop_early)
    for i, marker in enumerate(request.markers):
        for tp, result in appended[i].items():
            error = result.error if result.error is not None else replicated.get(tp, result).error
            answers[i][tp] = error.code if error is not None else ErrorCode.NONE
        # A transactional offset commit becomes visible (or is dropped) once its marker is written, as Kafka's
        # onTransactionCompleted makes it.
        offsets_partitions = [index for (topic, index), code in answers[i].items()
                              if topic == GROUP_METADATA_TOPIC and code == ErrorCode.NONE]
        if offsets_partitions:
            services.group_coordinator.on_transaction_completed(marker.producer_id, offsets_partitions,
                                                                bool(marker.transaction_result))
    return answers


def _markers_response(R: type[ApiMessage], request: WriteTxnMarkersRequest,
                      answers: list[dict[TopicPartition, ErrorCode]]) -> ApiMessage:
    """Each marker answered with its partitions' errors."""
    M = R.WritableTxnMarkerResult
    T = M.WritableTxnMarkerTopicResult
    markers = []
    for marker, answer in zip(request.markers, answers, strict=True):
        topics: dict[str, list] = {}
        for (topic, index), code in answer.items():
            topics.setdefault(topic, []).append(T.WritableTxnMarkerPartitionResult(partition_index=index,
                                                                                   error_code=code))
        markers.append(M(producer_id=marker.producer_id,
                         topics=[T(name=name, partitions=parts) for name, parts in topics.items()]))
    return R(markers=markers)


def _marker_batches(replica_manager: ReplicaManager, marker: WriteTxnMarkersRequest.WritableTxnMarker, now_ms: int,
                    answer: dict[TopicPartition, ErrorCode]) -> dict[TopicPartition, bytearray]:
    """The control batch of `marker` for each of its partitions this broker has; the others are answered
    UNKNOWN_TOPIC_OR_PARTITION in `answer`."""
    end_marker = EndTransactionMarker(
        ControlRecordType.COMMIT if marker.transaction_result else ControlRecordType.ABORT, marker.coordinator_epoch)
    entries: dict[TopicPartition, bytearray] = {}
    for t in marker.topics:
        for index in t.partition_indexes:
            tp = (t.name, index)
            if replica_manager.get_partition(*tp) is None:
                answer[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                entries[tp] = build_marker_batch(marker.producer_id, marker.producer_epoch, end_marker, now_ms)
    return entries


async def _wait_for_markers_replicated(replica_manager: ReplicaManager, timeout_ms: int,
                                       appended: list[dict[TopicPartition, AppendResult]],
                                       client: trio.SocketStream | None, stop_early: Callable[[], bool] | None,
                                       ) -> dict[TopicPartition, AppendResult]:
    """One acks=all wait for every marker appended: per partition, until the ISR has its last marker (so every
    earlier one too), at most request.timeout.ms."""
    last: dict[TopicPartition, AppendResult] = {}
    for results in appended:
        for tp, result in results.items():
            if result.error is None and result.info is not None:
                previous = last.get(tp)
                if previous is None or previous.info is None or result.info.last_offset > previous.info.last_offset:
                    last[tp] = result
    return await replica_manager.wait_for_replication(last, timeout_ms, client=client, stop_early=stop_early)


async def handle_describe_transactions(ctx: RequestContext, request: DescribeTransactionsRequest) -> ApiMessage:
    R = ctx.response_class
    S = R.TransactionState
    states = []
    state_manager = _coordinator(ctx).state_manager
    for transactional_id in request.transactional_ids:
        # An error leaves the other fields at the schema's defaults, as Kafka's answer does.
        state = dict(transactional_id=transactional_id, transaction_state="", transaction_timeout_ms=0,
                     transaction_start_time_ms=0, producer_id=0, producer_epoch=0, topics=[])
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            states.append(S(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, **state))
            continue
        try:
            if transactional_id == "":
                raise KafkaError(ErrorCode.INVALID_REQUEST, "empty transactional id")
            found = state_manager.get_transaction_state(transactional_id)
        except KafkaError as exc:
            states.append(S(error_code=exc.code, **state))
            continue
        if found is None:
            states.append(S(error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, **state))
            continue
        metadata = found.metadata
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(metadata.topic_partitions):
            by_topic.setdefault(topic, []).append(index)
        # As Kafka: only the topics the principal may DESCRIBE are shown.
        by_topic = {topic: indexes for topic, indexes in by_topic.items()
                    if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)}
        states.append(S(error_code=ErrorCode.NONE, transactional_id=transactional_id,
                        transaction_state=metadata.state.state_name, transaction_timeout_ms=metadata.txn_timeout_ms,
                        transaction_start_time_ms=metadata.txn_start_timestamp, producer_id=metadata.producer_id,
                        producer_epoch=metadata.producer_epoch,
                        topics=[S.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]))
    return ctx.response(throttle_time_ms=0, transaction_states=states)


async def handle_list_transactions(ctx: RequestContext, request: ListTransactionsRequest) -> ApiMessage:
    """Every broker answers for the transactional ids it coordinates; an admin client asks them all."""
    R = ctx.response_class
    state_manager = _coordinator(ctx).state_manager
    if not state_manager.active or state_manager.loading_partitions:
        # As Kafka: nothing is listed while any of this broker's partitions of `__transaction_state` loads.
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if state_manager.active else ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ctx.response(throttle_time_ms=0, error_code=error, unknown_state_filters=[], transaction_states=[])
    pattern = request.transactional_id_pattern if ctx.version >= 2 else None
    try:
        matcher = re2_pattern(pattern) if pattern else None
    except re.error:
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.INVALID_REGULAR_EXPRESSION,
                            unknown_state_filters=[], transaction_states=[])
    states = {}
    unknown = []
    for name in request.state_filters:
        state = TransactionState.from_name(name)
        if state is None:
            unknown.append(name)
        else:
            states[state] = name
    producer_ids = set(request.producer_id_filters)
    duration_ms = request.duration_filter if ctx.version >= 1 else -1
    now = wall_clock_ms()
    listed = [R.TransactionState(transactional_id=m.transactional_id, producer_id=m.producer_id,
                                 transaction_state=m.state.state_name)
              for m in state_manager.all_transactions()
              if m.state is not TransactionState.DEAD
              and (not producer_ids or m.producer_id in producer_ids)
              and (not request.state_filters or m.state in states)
              and (duration_ms < 0 or now - m.txn_start_timestamp > duration_ms)
              and (matcher is None or matcher.fullmatch(m.transactional_id))
              and ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.transactional_id)]
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, unknown_state_filters=unknown,
                        transaction_states=listed)


async def handle_describe_producers(ctx: RequestContext, request: DescribeProducersRequest) -> ApiMessage:
    """The producers a replica of each partition knows (Kafka's activeProducerState): their epochs, last sequences
    and open transactions. Any replica answers, as in Kafka (`kafka-transactions.sh describe-producers --broker-id`
    asks the one it is told to; followers keep the same producer state). A topic's error (an illegal name, no READ,
    unknown to the cluster) comes with its message; a partition's (not hosted here) with none, as Kafka's."""
    R = ctx.response_class
    T = R.TopicResponse
    P = T.PartitionResponse
    replica_manager = ctx.services.replica_manager
    topics = []
    for t in request.topics:
        topic_error: KafkaError | None = None
        illegal = validate_topic_name(t.name)
        if illegal is not None:
            topic_error = KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, illegal)
        elif not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.name):
            topic_error = KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                     DEFAULT_MESSAGES[ErrorCode.TOPIC_AUTHORIZATION_FAILED])
        elif t.name not in ctx.services.metadata_cache.topics:
            topic_error = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     DEFAULT_MESSAGES[ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])
        partitions = []
        for index in t.partition_indexes:
            if topic_error is not None:
                partitions.append(P(partition_index=index, error_code=topic_error.code,
                                    error_message=topic_error.message, active_producers=[]))
                continue
            try:
                partition = replica_manager.partition_or_error(t.name, index)
            except KafkaError as exc:
                partitions.append(P(partition_index=index, error_code=exc.code, error_message=None,
                                    active_producers=[]))
                continue
            producers = [P.ProducerState(producer_id=e.producer_id, producer_epoch=e.producer_epoch,
                                         last_sequence=e.last_seq, last_timestamp=e.last_timestamp,
                                         coordinator_epoch=e.coordinator_epoch,
                                         current_txn_start_offset=-1 if e.current_txn_first_offset is None
                                         else e.current_txn_first_offset)
                         for e in partition.log.producer_state.last_entries().values()]
            partitions.append(P(partition_index=index, error_code=ErrorCode.NONE, error_message=None,
                                active_producers=producers))
        topics.append(T(name=t.name, partitions=partitions))
    return ctx.response(throttle_time_ms=0, topics=topics)


# What Kafka 4.1 advertises (unstable.api.versions.enable off), narrower than the schemas this broker decodes.
VERSIONS = {ApiKey.INIT_PRODUCER_ID: (0, 5), ApiKey.WRITE_TXN_MARKERS: (1, 1)}
HANDLERS = {
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: handle_add_offsets_to_txn,
    ApiKey.END_TXN: handle_end_txn,
    ApiKey.WRITE_TXN_MARKERS: handle_write_txn_markers,
    ApiKey.DESCRIBE_TRANSACTIONS: handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: handle_list_transactions,
    ApiKey.DESCRIBE_PRODUCERS: handle_describe_producers,
}
