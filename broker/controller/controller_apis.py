"""The controller's request handlers (Kafka's ControllerApis): Kafka requests in, the quorum controller's
operations, Kafka responses out.

Served to brokers (and to tools that ask a controller): BrokerRegistration, BrokerHeartbeat, AlterPartition and
AllocateProducerIds; the metadata-changing admin requests brokers forward as they came (CreateTopics,
DeleteTopics, CreatePartitions, IncrementalAlterConfigs, AlterConfigs, ElectLeaders, AlterPartitionReassignments,
AlterClientQuotas, AlterUserScramCredentials, UpdateFeatures) and ListPartitionReassignments; Fetch of
`__cluster_metadata-0`, by which brokers replicate the metadata log; ApiVersions; DescribeCluster for controller
endpoints (KIP-919). Metadata is not served here, as Kafka's controller does not serve it.

`handle` is called the same way by the controller's socket server and, in a combined node, by the broker in the
same process; `peer` is the connection the request came on (None in process), which ties a broker's session to
its connection.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from kafka.protocol.admin.configs import AlterConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.api_message import ApiMessage

from minikafka.broker.controller.client_quota_control import ClientQuotaAlteration, ClientQuotaOp
from minikafka.broker.controller.cluster_control import BrokerRegistration
from minikafka.broker.controller.configuration_control import SET, ConfigAlteration
from minikafka.broker.controller.controller_errors import error_response
from minikafka.broker.controller.partition_reassignment import ReassignablePartition
from minikafka.broker.controller.quorum_controller import (
    ConfigResourceAlteration,
    NewPartitions,
    QuorumController,
    TopicIsrChanges,
)
from minikafka.broker.controller.replication_control import PREFERRED_ELECTION, CreatedTopic, IsrChange, NewTopic
from minikafka.broker.controller.scram_control import ScramCredentialDeletion, ScramCredentialUpsertion
from minikafka.broker.metadata.features import SAFE_DOWNGRADE, UPGRADE
from minikafka.broker.metadata.metadata_image import BrokerEndpointInfo
from minikafka.broker.network.socket_server import ConnectionInfo
from minikafka.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType, acl_binding_of, acl_filter_of
from minikafka.broker.security.standard_authorizer import StandardAuthorizer
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS, ApiSchema
from minikafka.protocol.control_plane import CONTROL_PLANE_SCHEMAS
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.internal_topics import METADATA_TOPIC, METADATA_TOPIC_ID
from minikafka.storage.log_config import LogConfig
from minikafka.storage.log_dir import LOST_DIRECTORY_ID
from minikafka.storage.metadata_log import METADATA_PARTITION

log = logging.getLogger("minikafka.controller")

ZERO_UUID = uuid.UUID(int=0)
BROKER_ENDPOINT_TYPE = 1  # DescribeCluster endpoint types (KIP-919)
CONTROLLER_ENDPOINT_TYPE = 2

_CONTROL_PLANE_KEYS = (ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT, ApiKey.ALTER_PARTITION,
                       ApiKey.ASSIGN_REPLICAS_TO_DIRS,
                       ApiKey.ALLOCATE_PRODUCER_IDS)
_CLIENT_KEYS = (ApiKey.API_VERSIONS, ApiKey.FETCH, ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS,
                ApiKey.CREATE_PARTITIONS, ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ALTER_CONFIGS,
                ApiKey.ELECT_LEADERS, ApiKey.DESCRIBE_CLUSTER, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.ALTER_CLIENT_QUOTAS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS, ApiKey.UPDATE_FEATURES)

Handler = Callable[[Any, int, "ConnectionInfo | None"], Awaitable[ApiMessage]]


class ControllerApis:
    def __init__(self, controller: QuorumController, authorizer: StandardAuthorizer | None = None) -> None:
        self.controller = controller
        self.authorizer = authorizer  # the KRaft controller's, when authorizer.class.name names one
        # The controller listener's advertised endpoint, once bound; DescribeCluster names it.
        self.endpoint: BrokerEndpointInfo | None = None
        # The schemas of the APIs served here, by key: what the controller's ApiVersions advertises.
        self.schemas: dict[int, ApiSchema] = {key: CONTROL_PLANE_SCHEMAS[key] for key in _CONTROL_PLANE_KEYS}
        self.schemas.update({key: SCHEMAS[key] for key in _CLIENT_KEYS})
        self._handlers: dict[int, Handler] = {
            ApiKey.BROKER_REGISTRATION: self._broker_registration,
            ApiKey.BROKER_HEARTBEAT: self._broker_heartbeat,
            ApiKey.ALTER_PARTITION: self._alter_partition,
            ApiKey.ALLOCATE_PRODUCER_IDS: self._allocate_producer_ids,
            ApiKey.ASSIGN_REPLICAS_TO_DIRS: self._assign_replicas_to_dirs,
            ApiKey.API_VERSIONS: self._api_versions,
            ApiKey.FETCH: self._fetch,
            ApiKey.CREATE_TOPICS: self._create_topics,
            ApiKey.DELETE_TOPICS: self._delete_topics,
            ApiKey.CREATE_PARTITIONS: self._create_partitions,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self._incremental_alter_configs,
            ApiKey.ALTER_CONFIGS: self._alter_configs,
            ApiKey.ELECT_LEADERS: self._elect_leaders,
            ApiKey.ALTER_CLIENT_QUOTAS: self._alter_client_quotas,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self._alter_user_scram_credentials,
            ApiKey.CREATE_ACLS: self._create_acls,
            ApiKey.DELETE_ACLS: self._delete_acls,
            ApiKey.UPDATE_FEATURES: self._update_features,
            ApiKey.DESCRIBE_CLUSTER: self._describe_cluster,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: self._alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: self._list_partition_reassignments,
        }

    async def handle(self, request: ApiMessage, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        """The response to `request` at `version`; raises ValueError for an API or version not served here."""
        handler = self._handlers.get(request.API_KEY)
        schema = self.schemas.get(request.API_KEY)
        if handler is None or schema is None:
            raise ValueError(f"the controller does not serve {type(request).__name__}")
        if not schema.min_version <= version <= schema.max_version:
            raise ValueError(f"the controller serves {type(request).__name__} v{schema.min_version}-"
                             f"{schema.max_version}, not v{version}")
        if not self._authorized(request.API_KEY, peer):
            return error_response(request, version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return await handler(request, version, peer)

    def _authorized(self, key: int, peer: ConnectionInfo | None) -> bool:
        """With an authorizer, the controller serves its brokers: super users and principals with CLUSTER_ACTION on
        the cluster (the brokers' own login), for every API but ApiVersions. Brokers authorize a client's admin
        request before they forward it, as themselves."""
        if self.authorizer is None or peer is None or key == ApiKey.API_VERSIONS:
            return True
        return self.authorizer.authorize(peer.principal, peer.host, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER,
                                         CLUSTER_NAME, request=ApiKey(key).name)

    def on_connection_closed(self, conn: ConnectionInfo) -> None:
        """A connection to the controller closed: the broker whose connection it was is fenced now."""
        self.controller.heartbeats.connection_closed(conn.connection_id)

    def _response(self, key: ApiKey, version: int, **fields: Any) -> ApiMessage:
        response: ApiMessage = self.schemas[key].response[version](**fields)
        return response

    # ---- brokers -----------------------------------------------------------------------------------------------

    async def _broker_registration(self, request: Any, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        try:
            if request.is_migrating_zk_broker:
                raise KafkaError(ErrorCode.BROKER_ID_NOT_REGISTERED,
                                 "Controller does not support registering ZK brokers.")
            registration = BrokerRegistration(
                broker_id=request.broker_id, cluster_id=request.cluster_id, incarnation_id=request.incarnation_id,
                endpoints=[BrokerEndpointInfo(li.name, li.host, li.port, li.security_protocol)
                           for li in request.listeners],
                rack=request.rack)
            epoch = await self.controller.register_broker(registration, _connection_id(peer))
        except KafkaError as exc:
            log.info("BrokerRegistration of broker %d refused: %s %s", request.broker_id, exc.code.name,
                     exc.message or "")
            return self._response(ApiKey.BROKER_REGISTRATION, version, throttle_time_ms=0, error_code=exc.code,
                                  broker_epoch=-1)
        return self._response(ApiKey.BROKER_REGISTRATION, version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                              broker_epoch=epoch)

    async def _broker_heartbeat(self, request: Any, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        try:
            reply = await self.controller.heartbeat(
                request.broker_id, request.broker_epoch, request.current_metadata_offset,
                want_fence=request.want_fence, want_shut_down=request.want_shut_down,
                connection_id=_connection_id(peer))
        except KafkaError as exc:
            return self._response(ApiKey.BROKER_HEARTBEAT, version, throttle_time_ms=0, error_code=exc.code,
                                  is_caught_up=False, is_fenced=True, should_shut_down=False)
        return self._response(ApiKey.BROKER_HEARTBEAT, version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                              is_caught_up=reply.is_caught_up, is_fenced=reply.is_fenced,
                              should_shut_down=reply.should_shut_down)

    async def _allocate_producer_ids(self, request: Any, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        try:
            start, length = await self.controller.allocate_producer_ids(request.broker_id, request.broker_epoch)
        except KafkaError as exc:
            return self._response(ApiKey.ALLOCATE_PRODUCER_IDS, version, throttle_time_ms=0, error_code=exc.code,
                                  producer_id_start=-1, producer_id_len=0)
        return self._response(ApiKey.ALLOCATE_PRODUCER_IDS, version, throttle_time_ms=0,
                              error_code=ErrorCode.NONE, producer_id_start=start, producer_id_len=length)

    async def _assign_replicas_to_dirs(self, request: Any, version: int,
                                       peer: ConnectionInfo | None) -> ApiMessage:
        """KIP-858's replica placement; only the replicas placed in the LOST directory (their log dir failed) act
        here: the broker leaves their ISRs and leaderships. Other placements are not kept."""
        R = self.schemas[ApiKey.ASSIGN_REPLICAS_TO_DIRS].response[version]
        lost = [(t.topic_id, p.partition_index) for d in request.directories if d.id == LOST_DIRECTORY_ID
                for t in d.topics for p in t.partitions]
        try:
            if lost:
                await self.controller.replicas_offline(request.broker_id, request.broker_epoch, lost)
        except KafkaError as exc:
            return self._response(ApiKey.ASSIGN_REPLICAS_TO_DIRS, version, throttle_time_ms=0, error_code=exc.code,
                                  directories=[])
        D = R.DirectoryData
        return self._response(ApiKey.ASSIGN_REPLICAS_TO_DIRS, version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                              directories=[D(id=d.id, topics=[D.TopicData(topic_id=t.topic_id, partitions=[
                                  D.TopicData.PartitionData(partition_index=p.partition_index,
                                                            error_code=ErrorCode.NONE) for p in t.partitions])
                                  for t in d.topics]) for d in request.directories])

    async def _alter_partition(self, request: Any, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        """v0-1 name topics, v2+ give their ids (KIP-841); v3 gives each ISR member's broker epoch (KIP-903).
        Versions before 2 answer UNKNOWN_TOPIC_OR_PARTITION and OPERATION_NOT_ATTEMPTED where later ones answer
        UNKNOWN_TOPIC_ID and INELIGIBLE_REPLICA, as Kafka does."""
        R = self.schemas[ApiKey.ALTER_PARTITION].response[version]
        by_id = version >= 2
        topics = []
        for t in request.topics:
            changes = []
            for p in t.partitions:
                new_isr = ([(s.broker_id, s.broker_epoch) for s in p.new_isr_with_epochs] if version >= 3
                           else [(broker_id, -1) for broker_id in p.new_isr])
                changes.append(IsrChange(p.partition_index, p.leader_epoch, p.partition_epoch, new_isr))
            topics.append(TopicIsrChanges(None if by_id else t.topic_name, t.topic_id if by_id else None, changes))
        try:
            results = await self.controller.alter_partition(request.broker_id, request.broker_epoch, topics)
        except KafkaError as exc:
            return R(throttle_time_ms=0, error_code=exc.code, topics=[])
        old_codes = {ErrorCode.UNKNOWN_TOPIC_ID: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     ErrorCode.INELIGIBLE_REPLICA: ErrorCode.OPERATION_NOT_ATTEMPTED,
                     ErrorCode.NEW_LEADER_ELECTED: ErrorCode.FENCED_LEADER_EPOCH}
        answer = []
        for t, topic_results in zip(request.topics, results, strict=True):
            parts = []
            for result in topic_results:
                code = result.error if by_id else old_codes.get(result.error, result.error)
                fields: dict[str, Any] = dict(partition_index=result.change.index, error_code=code)
                if result.state is not None:
                    fields.update(leader_id=result.state.leader, leader_epoch=result.state.leader_epoch,
                                  isr=list(result.state.isr), leader_recovery_state=0,
                                  partition_epoch=result.state.partition_epoch)
                parts.append(R.TopicData.PartitionData(**fields))
            answer.append(R.TopicData(topic_name=None if by_id else t.topic_name,
                                      topic_id=t.topic_id if by_id else None, partitions=parts))
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=answer)

    # ---- the metadata log --------------------------------------------------------------------------------------

    async def _fetch(self, request: Any, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        """A broker's long poll of `__cluster_metadata-0`: committed batches from its fetch offset, the high
        watermark being the log end offset; parked until records come or max_wait_ms passes on trio's clock.
        Any other partition is unknown here. Fetch sessions are not kept (session id 0, as the broker does)."""
        R = self.schemas[ApiKey.FETCH].response[version]
        PD = R.FetchableTopicResponse.PartitionData
        if request.session_id != 0 or request.session_epoch > 0:
            code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND if request.session_id else ErrorCode.INVALID_FETCH_SESSION_EPOCH
            return R(throttle_time_ms=0, error_code=code, session_id=0, responses=[])
        by_id = version >= 13
        wanted = []  # the partition entries fetching the metadata partition
        for t in request.topics:
            is_metadata = t.topic_id == METADATA_TOPIC_ID if by_id else t.topic == METADATA_TOPIC
            wanted += [p for p in t.partitions if is_metadata and p.partition == METADATA_PARTITION]
        controller = self.controller
        deadline = trio.current_time() + max(0, request.max_wait_ms) / 1000
        if wanted and request.min_bytes > 0 and all(p.fetch_offset == controller.log_end_offset for p in wanted):
            await controller.wait_for_records(min(p.fetch_offset for p in wanted), deadline)
        metadata_entries = {id(p) for p in wanted}
        responses = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                code, records = ErrorCode.NONE, b""
                if id(p) not in metadata_entries:
                    code = ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    try:
                        records = await controller.read_metadata(p.fetch_offset,
                                                                 min(p.partition_max_bytes, request.max_bytes))
                    except KafkaError as exc:
                        code = exc.code
                known = code is not ErrorCode.UNKNOWN_TOPIC_ID and code is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                end = controller.log_end_offset if known else -1
                parts.append(PD(partition_index=p.partition, error_code=code, high_watermark=end,
                                last_stable_offset=end, log_start_offset=controller.log_start_offset if known else -1,
                                aborted_transactions=None, preferred_read_replica=-1, records=records))
            responses.append(R.FetchableTopicResponse(topic=None if by_id else t.topic,
                                                      topic_id=t.topic_id if by_id else None, partitions=parts))
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=responses)

    # ---- admin requests brokers forward ------------------------------------------------------------------------

    async def _create_topics(self, request: Any, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        """A topic listed twice is INVALID_REQUEST; v5+ answers each created topic's partition count,
        replication factor and configs (KIP-525), v7 its id."""
        R = self.schemas[ApiKey.CREATE_TOPICS].response[version]
        counts: dict[str, int] = {}
        for t in request.topics:
            counts[t.name] = counts.get(t.name, 0) + 1
        unique = [t for t in request.topics if counts[t.name] == 1]
        created = await self.controller.create_topics(
            [NewTopic(t.name, t.num_partitions, t.replication_factor,
                      {a.partition_index: list(a.broker_ids) for a in t.assignments},
                      {c.name: c.value for c in t.configs}) for t in unique],
            validate_only=request.validate_only)
        outcome: dict[str, CreatedTopic | KafkaError] = {t.name: r for t, r in zip(unique, created, strict=True)}
        results = []
        for t in request.topics:
            result = outcome.get(t.name) or KafkaError(
                ErrorCode.INVALID_REQUEST, f"Create topics request from client contains multiple entries for topic "
                                           f"{t.name}")
            if isinstance(result, KafkaError):
                log.info("CreateTopics %s: %s %s", t.name, result.code.name, result.message or "")
                results.append(R.CreatableTopicResult(name=t.name, topic_id=ZERO_UUID, error_code=result.code,
                                                      error_message=result.message, num_partitions=-1,
                                                      replication_factor=-1, configs=None))
                continue
            entries = LogConfig.from_props(result.configs, self.controller.config.log_defaults).describe()
            results.append(R.CreatableTopicResult(
                name=t.name, topic_id=ZERO_UUID if request.validate_only else result.topic_id,
                error_code=ErrorCode.NONE, error_message=None, num_partitions=result.num_partitions,
                replication_factor=result.replication_factor,
                configs=[R.CreatableTopicResult.CreatableTopicConfigs(
                    name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                    is_sensitive=e.is_sensitive) for e in entries]))
        return R(throttle_time_ms=0, topics=results)

    async def _delete_topics(self, request: Any, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        """By name, and from v6 by name or id."""
        R = self.schemas[ApiKey.DELETE_TOPICS].response[version]
        if version >= 6:
            targets = [(t.name, t.topic_id if t.topic_id not in (None, ZERO_UUID) else None) for t in request.topics]
        else:
            targets = [(name, None) for name in request.topic_names]
        deleted = await self.controller.delete_topics(targets)
        return R(throttle_time_ms=0, responses=[
            R.DeletableTopicResult(name=d.name, topic_id=d.topic_id or ZERO_UUID,
                                   error_code=d.error.code if d.error else ErrorCode.NONE,
                                   error_message=d.error.message if d.error else None)
            for d in deleted])

    async def _create_partitions(self, request: Any, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        R = self.schemas[ApiKey.CREATE_PARTITIONS].response[version]
        errors = await self.controller.create_partitions(
            [NewPartitions(t.name, t.count, [list(a.broker_ids) for a in t.assignments] if t.assignments else None)
             for t in request.topics], validate_only=request.validate_only)
        return R(throttle_time_ms=0, results=[
            R.CreatePartitionsTopicResult(name=t.name, error_code=e.code if e else ErrorCode.NONE,
                                          error_message=e.message if e else None)
            for t, e in zip(request.topics, errors, strict=True)])

    async def _incremental_alter_configs(self, request: IncrementalAlterConfigsRequest, version: int,
                                         peer: ConnectionInfo | None) -> ApiMessage:
        resources = [ConfigResourceAlteration(r.resource_type, r.resource_name,
                                              [ConfigAlteration(c.name, c.config_operation, c.value)
                                               for c in r.configs])
                     for r in request.resources]
        errors = await self.controller.alter_configs(resources, incremental=True,
                                                     validate_only=request.validate_only)
        return self._alter_configs_response(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, request, errors)

    async def _alter_configs(self, request: AlterConfigsRequest, version: int,
                             peer: ConnectionInfo | None) -> ApiMessage:
        """The legacy AlterConfigs: the given set replaces all of a topic's overrides."""
        resources = [ConfigResourceAlteration(r.resource_type, r.resource_name,
                                              [ConfigAlteration(c.name, SET, c.value) for c in r.configs])
                     for r in request.resources]
        errors = await self.controller.alter_configs(resources, incremental=False,
                                                     validate_only=request.validate_only)
        return self._alter_configs_response(ApiKey.ALTER_CONFIGS, version, request, errors)

    def _alter_configs_response(self, key: ApiKey, version: int, request: Any,
                                errors: list[KafkaError | None]) -> ApiMessage:
        R = self.schemas[key].response[version]
        return R(throttle_time_ms=0, responses=[
            R.AlterConfigsResourceResponse(error_code=e.code if e else ErrorCode.NONE,
                                           error_message=e.message if e else None,
                                           resource_type=r.resource_type, resource_name=r.resource_name)
            for r, e in zip(request.resources, errors, strict=True)])

    async def _alter_client_quotas(self, request: Any, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        alterations = [ClientQuotaAlteration([(e.entity_type, e.entity_name) for e in entry.entity],
                                             [ClientQuotaOp(op.key, op.value, op.remove) for op in entry.ops])
                       for entry in request.entries]
        errors = await self.controller.alter_client_quotas(alterations, validate_only=request.validate_only)
        R = self.schemas[ApiKey.ALTER_CLIENT_QUOTAS].response[version]
        return R(throttle_time_ms=0, entries=[
            R.EntryData(error_code=e.code if e else ErrorCode.NONE, error_message=e.message if e else None,
                        entity=[R.EntryData.EntityData(entity_type=d.entity_type, entity_name=d.entity_name)
                                for d in entry.entity])
            for entry, e in zip(request.entries, errors, strict=True)])

    async def _alter_user_scram_credentials(self, request: Any, version: int,
                                            peer: ConnectionInfo | None) -> ApiMessage:
        results = await self.controller.alter_user_scram_credentials(
            [ScramCredentialDeletion(d.name, d.mechanism) for d in request.deletions],
            [ScramCredentialUpsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
             for u in request.upsertions])
        R = self.schemas[ApiKey.ALTER_USER_SCRAM_CREDENTIALS].response[version]
        return R(throttle_time_ms=0, results=[
            R.AlterUserScramCredentialsResult(user=user, error_code=e.code if e else ErrorCode.NONE,
                                              error_message=e.message if e else None)
            for user, e in results])

    async def _update_features(self, request: Any, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        """All the updates or none (Kafka's QuorumController.updateFeatures); v0's AllowDowngrade is a safe
        downgrade. Per-feature results only up to v1, and only when the update succeeded."""
        updates = [(u.feature, u.max_version_level,
                    (SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE) if version == 0 else u.upgrade_type)
                   for u in request.feature_updates]
        error = await self.controller.update_features(updates, validate_only=version >= 1 and request.validate_only)
        R = self.schemas[ApiKey.UPDATE_FEATURES].response[version]
        if error is not None:
            return R(throttle_time_ms=0, error_code=error.code, results=[],
                     error_message="The update failed for all features since the following feature had an error: "
                                   f"{error.message}")
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                 results=[R.UpdatableFeatureResult(feature=u.feature, error_code=ErrorCode.NONE, error_message=None)
                          for u in request.feature_updates] if version <= 1 else [])

    async def _create_acls(self, request: Any, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        errors = await self.controller.create_acls([acl_binding_of(c) for c in request.creations])
        R = self.schemas[ApiKey.CREATE_ACLS].response[version]
        return R(throttle_time_ms=0, results=[
            R.AclCreationResult(error_code=e.code if e else ErrorCode.NONE, error_message=e.message if e else None)
            for e in errors])

    async def _delete_acls(self, request: Any, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        results = await self.controller.delete_acls([acl_filter_of(f) for f in request.filters])
        R = self.schemas[ApiKey.DELETE_ACLS].response[version]
        M = R.DeleteAclsFilterResult.DeleteAclsMatchingAcl
        return R(throttle_time_ms=0, filter_results=[
            R.DeleteAclsFilterResult(
                error_code=e.code if e else ErrorCode.NONE, error_message=e.message if e else None,
                matching_acls=[M(error_code=ErrorCode.NONE, error_message=None, resource_type=a.resource_type,
                                 resource_name=a.resource_name, pattern_type=a.pattern_type, principal=a.principal,
                                 host=a.host, operation=a.operation, permission_type=a.permission_type)
                               for a in matched])
            for e, matched in results])

    async def _elect_leaders(self, request: Any, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        """Preferred (v0 always) or unclean (v1+, KIP-460) elections; all partitions when none are named."""
        R = self.schemas[ApiKey.ELECT_LEADERS].response[version]
        election_type = request.election_type if version >= 1 else PREFERRED_ELECTION
        wanted = (None if request.topic_partitions is None
                  else [(t.topic, index) for t in request.topic_partitions for index in t.partitions])
        try:
            results = await self.controller.elect_leaders(election_type, wanted)
        except KafkaError as exc:
            return R(throttle_time_ms=0, error_code=exc.code, replica_election_results=[])
        by_topic: dict[str, list[Any]] = {}
        for r in results:
            by_topic.setdefault(r.topic, []).append(R.ReplicaElectionResult.PartitionResult(
                partition_id=r.index, error_code=r.error, error_message=r.message))
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=[
            R.ReplicaElectionResult(topic=topic, partition_result=parts) for topic, parts in by_topic.items()])

    async def _alter_partition_reassignments(self, request: Any, version: int,
                                             peer: ConnectionInfo | None) -> ApiMessage:
        """v1 may refuse a change of replication factor (KIP-860), and echoes whether it allowed one."""
        R = self.schemas[ApiKey.ALTER_PARTITION_REASSIGNMENTS].response[version]
        allow = request.allow_replication_factor_change if version >= 1 else True
        targets = [ReassignablePartition(t.name, p.partition_index, None if p.replicas is None else list(p.replicas))
                   for t in request.topics for p in t.partitions]
        errors = iter(await self.controller.alter_partition_reassignments(targets, allow))
        responses = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                error = next(errors)
                parts.append(R.ReassignableTopicResponse.ReassignablePartitionResponse(
                    partition_index=p.partition_index, error_code=error.code if error else ErrorCode.NONE,
                    error_message=error.message if error else None))
            responses.append(R.ReassignableTopicResponse(name=t.name, partitions=parts))
        return R(throttle_time_ms=0, allow_replication_factor_change=allow, error_code=ErrorCode.NONE,
                 error_message=None, responses=responses)

    async def _list_partition_reassignments(self, request: Any, version: int,
                                            peer: ConnectionInfo | None) -> ApiMessage:
        """Null topics list every ongoing reassignment."""
        R = self.schemas[ApiKey.LIST_PARTITION_REASSIGNMENTS].response[version]
        wanted = (None if request.topics is None
                  else [(t.name, list(t.partition_indexes)) for t in request.topics])
        by_topic: dict[str, list[Any]] = {}
        for ongoing in self.controller.list_partition_reassignments(wanted):
            by_topic.setdefault(ongoing.topic, []).append(
                R.OngoingTopicReassignment.OngoingPartitionReassignment(
                    partition_index=ongoing.index, replicas=ongoing.replicas,
                    adding_replicas=ongoing.adding_replicas, removing_replicas=ongoing.removing_replicas))
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, topics=[
            R.OngoingTopicReassignment(name=name, partitions=parts) for name, parts in by_topic.items()])

    # ---- about the controller ----------------------------------------------------------------------------------

    async def _api_versions(self, request: Any, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        R = self.schemas[ApiKey.API_VERSIONS].response[version]
        return R(error_code=ErrorCode.NONE, throttle_time_ms=0, api_keys=[
            R.ApiVersion(api_key=key, min_version=schema.min_version, max_version=schema.max_version)
            for key, schema in sorted(self.schemas.items())])

    async def _describe_cluster(self, request: Any, version: int, peer: ConnectionInfo | None) -> ApiMessage:
        """A controller describes the controllers (KIP-919): asked for brokers, it answers
        MISMATCHED_ENDPOINT_TYPE, as Kafka's does."""
        R = self.schemas[ApiKey.DESCRIBE_CLUSTER].response[version]
        controller = self.controller
        if version < 1 or request.endpoint_type != CONTROLLER_ENDPOINT_TYPE:
            return R(throttle_time_ms=0, error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE,
                     error_message="this is a controller endpoint: brokers are described by brokers",
                     endpoint_type=CONTROLLER_ENDPOINT_TYPE, cluster_id=controller.cluster_id, controller_id=-1,
                     brokers=[])
        endpoint = self.endpoint
        brokers = [] if endpoint is None else [R.DescribeClusterBroker(
            broker_id=controller.node_id, host=endpoint.host, port=endpoint.port, rack=None, is_fenced=False)]
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                 endpoint_type=CONTROLLER_ENDPOINT_TYPE, cluster_id=controller.cluster_id,
                 controller_id=controller.node_id, brokers=brokers)


def _connection_id(peer: ConnectionInfo | None) -> int | None:
    return None if peer is None else peer.connection_id
