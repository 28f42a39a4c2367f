"""The controller of a `minikafka.Cluster`: a controller-only node (`process.roles=controller`), Kafka's KRaft
controller quorum of one, which owns the cluster metadata in its metadata log.

Its handle is a node handle like a broker's (stop, kill, restart, pause, resume) so a test can take the controller
away and bring it back: brokers keep serving with what they know, and elections wait until it returns. A secured
cluster's controller listener has the brokers' security (`security`): they log in to it as they do to each other.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from minikafka.control_client import ControlClient
from minikafka.node_handle import DEFAULT_START_TIMEOUT_S, NodeHandle

if TYPE_CHECKING:
    from minikafka.handle_security import HandleSecurity

# Kafka's own test clusters number their controllers from 3000, apart from broker ids.
CONTROLLER_NODE_ID = 3000
CONTROLLER_LISTENER = "CONTROLLER"
# Set through the handle's own arguments, so the handle knows where the controller listens and stores.
OWNED_PROPERTIES = ("process.roles", "listeners", "advertised.listeners", "controller.listener.names",
                    "log.dirs", "log.dir", "metadata.log.dir", "node.id")


class Controller(NodeHandle):
    """A handle on the cluster's controller process; its port and metadata log survive restarts."""

    ready_prefix = b"minikafka controller listening on "
    kind = "controller"

    def __init__(self, *, port: int | None = None, host: str = "127.0.0.1", data_dir: str | Path | None = None,
                 keep_data: bool = False, in_process: bool = False, config: Mapping[str, object] | None = None,
                 node_id: int = CONTROLLER_NODE_ID, log_path: str | Path | None = None,
                 start_timeout_s: float = DEFAULT_START_TIMEOUT_S, security: HandleSecurity | None = None,
                 clock: str = "system") -> None:
        """security: the listener's TLS and SASL, as the cluster's brokers have theirs; None: PLAINTEXT.
        clock: "system", or "manual" for a clock the test advances (see minikafka.clock)."""
        owned = [name for name in (config or {}) if name in OWNED_PROPERTIES]
        if owned:
            raise ValueError(f"set {', '.join(owned)} through the controller's port, host and data dir, not its "
                             "config")
        super().__init__(port=port, host=host, data_dir=data_dir, keep_data=keep_data, in_process=in_process,
                         config=config or {}, node_id=node_id, log_path=log_path, start_timeout_s=start_timeout_s,
                         clock=clock)
        self.security = security if security is not None and security.protocol != "PLAINTEXT" else None

    def properties(self) -> dict[str, str]:
        props = {**self.config, "process.roles": "controller", "node.id": str(self.node_id),
                 "controller.listener.names": CONTROLLER_LISTENER,
                 "listeners": f"{CONTROLLER_LISTENER}://{self.host}:{self._port}", "log.dirs": str(self.data_dir)}
        if self.security is not None:
            props.update(self.security.controller_properties(CONTROLLER_LISTENER))
            props.update(self.security.authorizer_properties())
        return props

    def control(self) -> ControlClient:
        """A client of the controller's control API (cut links, leadership moves), as the admin where its listener
        is secured."""
        return ControlClient(self.address, security=self.security.for_handle() if self.security else None)

    @property
    def quorum_bootstrap_server(self) -> str:
        """HOST:PORT for brokers' controller.quorum.bootstrap.servers; known from the first start on, also while
        the controller is down (its port is held)."""
        if not self._port:
            raise RuntimeError("the controller has not been started yet, so its port is not known")
        return f"{self.host}:{self._port}"

    def __repr__(self) -> str:
        where = self.address if self._bound else "stopped"
        return f"<minikafka controller node {self.node_id} {where} ({self._mode()}) data {self.data_dir}>"
