"""The controller role of a node: the quorum controller, its background duties, and its listener.

`run()` locks the metadata log dir (`metadata.log.dir`, else the first log dir; its `.lock`, held until the
controller stops, keeps a second node out of it), opens the metadata log there and replays it, binds the listener
named by `controller.listener.names` when `listeners` has one, starts the controller's tasks, and then reports
itself started; it serves until cancelled. Without a controller listener (a combined node with no controller
port) the controller is reached in process only, through `apis`.

The listener is secured as a broker's are (its security protocol in listener.security.protocol.map, its ssl.* and
SASL properties; SCRAM credentials from the metadata): brokers authenticate to it as they do to each other. A link
fault cut both ways from here reaches the broker's control API as brokers reach each other, by the inter-broker
listener's properties in this node's config.
Requests on the listener are answered one at a time per connection (the socket server's guarantee); an API or
version the controller does not serve closes the connection, as Kafka's does, except that an ApiVersions request
of a newer version is answered in v0 with UNSUPPORTED_VERSION so the client can retry. The listener also serves
minikafka's private control API (cut links, leadership moves; see controller_control), and refuses the requests
of brokers whose link to this node is cut.
"""
from __future__ import annotations

import logging

import trio
from kafka.protocol.metadata.api_versions import ApiVersionsRequest

from minikafka.broker.controller.controller_apis import ControllerApis
from minikafka.broker.controller.controller_config import QuorumControllerConfig
from minikafka.broker.controller.controller_control import ControllerControl
from minikafka.broker.controller.controller_metrics import controller_families
from minikafka.broker.controller.quorum_controller import QuorumController
from minikafka.broker.faults.link_faults import LinkFaults
from minikafka.broker.metadata.metadata_image import BrokerEndpointInfo, MetadataImage
from minikafka.broker.network.metrics_endpoint import as_dict
from minikafka.broker.network.request_channel import decode_or_close, parse_header_or_close
from minikafka.broker.network.socket_server import CloseConnection, ConnectionInfo, SocketServer, open_listeners
from minikafka.broker.security.client_security import inter_broker_security
from minikafka.broker.security.listener_security import ListenerSecurity, listener_security
from minikafka.broker.security.sasl_server import ScramCredentials
from minikafka.broker.security.standard_authorizer import StandardAuthorizer, parse_super_users
from minikafka.config import SECURITY_PROTOCOLS, BrokerConfig, Endpoint
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import encode_response
from minikafka.protocol.control import CONTROL_API_KEY
from minikafka.protocol.errors import ErrorCode
from minikafka.storage.log_dir import lock_log_dir

log = logging.getLogger("minikafka.controller")


class ControllerServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.controller_config = QuorumControllerConfig.from_broker_config(config)
        self.listeners: list[Endpoint] = config.controller_listeners
        # Each listener's security, built once (ConfigError before anything starts); SCRAM's credentials are the
        # metadata's.
        scram_credentials = ScramCredentials(lambda: self.controller.image.scram_credentials)
        self.security: dict[str, ListenerSecurity] = {
            e.listener: listener_security(config, e.listener, scram_credentials) for e in self.listeners}
        self.metadata_dir = config.metadata_log_dir
        self.endpoint: BrokerEndpointInfo | None = None  # the bound listener, once started
        broker_security = inter_broker_security(config)
        self.links = LinkFaults(lambda node_id: broker_security)  # a combined node shares its broker's
        self.control = ControllerControl(self.links, lambda: self.controller,
                                         lambda: as_dict(controller_families(self)))
        # Built by run(), from the metadata log.
        self.controller: QuorumController
        self.apis: ControllerApis
        self.socket_server: SocketServer

    @property
    def image(self) -> MetadataImage:
        return self.controller.image

    async def run(self, *, task_status: trio.TaskStatus[ControllerServer] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; `task_status.started()` fires once the listener accepts connections."""
        with lock_log_dir(self.metadata_dir):
            await self._run(task_status)

    async def _run(self, task_status: trio.TaskStatus[ControllerServer]) -> None:
        self.controller = QuorumController.open(self.controller_config, self.metadata_dir)
        try:
            authorizer = None
            if self.config.authorizer_enabled:  # over the ACLs of its own metadata
                controller = self.controller
                authorizer = StandardAuthorizer(lambda: controller.image,
                                                parse_super_users(self.config.get("super.users")),
                                                self.config.get("allow.everyone.if.no.acl.found"))
            self.control.super_users = None if authorizer is None else authorizer.super_users
            self.apis = ControllerApis(self.controller, authorizer)
            self.socket_server = SocketServer(self._process, self.config.get("socket.request.max.bytes"),
                                              self.config.get("connections.max.idle.ms") / 1000,
                                              on_connection_closed=self.apis.on_connection_closed,
                                              security=self.security)
            bound = [(e, await open_listeners(f"controller listener {e.listener}", e.host, e.port))
                     for e in self.listeners]
            async with trio.open_nursery() as nursery:
                for endpoint, listeners in bound:
                    nursery.start_soon(self.socket_server.serve, endpoint.listener, listeners)
                if bound:
                    endpoint, listeners = bound[0]
                    port = listeners[0].socket.getsockname()[1]
                    host = endpoint.host if endpoint.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
                    protocol = SECURITY_PROTOCOLS[self.security[endpoint.listener].protocol]
                    self.endpoint = self.apis.endpoint = BrokerEndpointInfo(endpoint.listener, host, port, protocol)
                    log.info("controller %d listening on %s:%d", self.controller.node_id, host, port)
                await nursery.start(self.controller.run)
                task_status.started(self)
        finally:
            self.controller.close()

    async def _process(self, frame: bytes, conn: ConnectionInfo) -> bytes | None:
        header, body_pos = parse_header_or_close(frame)
        if header.api_key == CONTROL_API_KEY:
            return await self.control.process(header, frame, body_pos, conn)
        schema = self.apis.schemas.get(header.api_key)
        if schema is None:
            raise CloseConnection(f"the controller does not serve API key {header.api_key} "
                                  f"(version {header.api_version})")
        if not schema.min_version <= header.api_version <= schema.max_version:
            if header.api_key == ApiKey.API_VERSIONS:
                answer = await self.apis.handle(ApiVersionsRequest[0](), 0, conn)
                answer.error_code = ErrorCode.UNSUPPORTED_VERSION
                return encode_response(schema, 0, header.correlation_id, answer)
            raise CloseConnection(f"unsupported version {header.api_version} of API key {header.api_key} "
                                  f"(supported {schema.min_version}-{schema.max_version})")
        request = decode_or_close(schema, header, frame, body_pos)
        self.control.admit(header.api_key, request, conn)
        response = await self.apis.handle(request, header.api_version, conn)
        self.control.admit(header.api_key, request, conn)  # cut while it was handled: the response is lost
        return encode_response(schema, header.api_version, header.correlation_id, response)
