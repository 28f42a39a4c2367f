"""`minikafka.Broker`: one real broker for a test or a script, started and cleaned up by a `with` block.

    with minikafka.Broker() as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        ...
        broker.faults.fail_requests("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)
        broker.restart()
        assert [r.value for r in broker.state.records("t", 0)] == [b"a", b"b"]

By default the broker is a `python -m minikafka serve` child process on a free loopback port with a temporary
data dir, removed on exit (also when the block raises) unless `keep_data=True` or the dir was given. On its own it
is a combined node (broker and controller in one process, a cluster of one); in a `minikafka.Cluster` it is a
broker-only node that finds the cluster's controller. The handle holds its port from the first start until
`close()` (on Linux), so a restart never finds it taken. `in_process=True` runs it on a thread of this process
instead, for the fastest start.

With `security="SSL"`, `"SASL_PLAINTEXT"` or `"SASL_SSL"` the broker's listener is secured as Kafka secures it
(certificates made for the test, `users` as SASL/PLAIN users, `ssl_client_auth` for mutual TLS) and
`client_config(user=..., client=...)` gives each client library its settings. It is the inter-broker listener too:
brokers reach each other (and a cluster's controller) over TLS and SASL as the `admin` user, and no listener is
plaintext. `faults` and `state` connect as `admin` as well.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from minikafka.clock import Clock
from minikafka.control_client import ControlClient
from minikafka.controller_handle import CONTROLLER_LISTENER
from minikafka.faults import Faults
from minikafka.handle_security import HandleSecurity
from minikafka.node_handle import DEFAULT_START_TIMEOUT_S, NodeHandle
from minikafka.state_waits import StateWaits

if TYPE_CHECKING:
    from minikafka.acl import Acl
    from minikafka.controller_handle import Controller
    from minikafka.state import State
    from minikafka.status_page import StatusPage

# Test-friendly defaults, as Kafka's own test harness sets them; `config` overrides them.
TEST_DEFAULTS = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
}
# Set through the handle's own arguments, so the handle knows where the broker listens and stores.
OWNED_PROPERTIES = ("listeners", "advertised.listeners", "log.dirs", "log.dir", "node.id")


class Broker(StateWaits, NodeHandle):
    """A handle on one broker. Not started until `start()` or `with`; restartable on the same port and data."""

    ready_prefix = b"minikafka listening on "
    kind = "broker"

    def __init__(self, *, port: int | None = None, host: str = "127.0.0.1", data_dir: str | Path | None = None,
                 keep_data: bool = False, in_process: bool = False, config: Mapping[str, object] | None = None,
                 node_id: int = 1, log_path: str | Path | None = None,
                 start_timeout_s: float = DEFAULT_START_TIMEOUT_S, controller: Controller | None = None,
                 log_dirs: int = 1, security: str | HandleSecurity = "PLAINTEXT",
                 users: Mapping[str, str] | None = None, ssl_client_auth: str = "none",
                 acls: Sequence[Acl] | None = None, ui: bool = False, ui_port: int | None = None,
                 clock: str = "system") -> None:
        """
        port: the listener's port (default: a free one, kept across restarts).
        data_dir: log.dirs (default: a temporary dir, removed on close unless keep_data).
        log_dirs: how many log dirs (JBOD); more than one are `log-dir-<n>` in data_dir (see `log_dirs`).
        config: broker properties by Kafka's names, e.g. {"num.partitions": 3, "log.segment.bytes": 1048576}.
        log_path: the broker's log file (default: next to the data dir).
        controller: the cluster's controller (process.roles=broker); none makes a combined node of its own.
        security: the client listener's security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (or the
          HandleSecurity of a Cluster, shared by its brokers: one CA, the same users).
        users: SASL users and their passwords, besides `admin` (see `admin_password`).
        ssl_client_auth: none, requested or required (mutual TLS; `client_config` then brings a certificate).
        acls: turn Kafka's StandardAuthorizer on (a SASL listener only), `admin` its super user, with these ACLs
          (`minikafka.Acl`) created at the first start; `add_acls` / `remove_acls` change them later.
        ui: serve the status page (minikafka.status_page) from this process once started, at `ui_url` (on
          `ui_port`, default a free one).
        clock: "system", or "manual": a clock the test advances (`clock.advance(ms)`), for tests only (see
          minikafka.clock and docs/virtual-time.md).
        """
        owned = [name for name in (config or {}) if name in OWNED_PROPERTIES]
        if owned:
            raise ValueError(f"set {', '.join(owned)} through Broker(port=, host=, data_dir=, node_id=), "
                             "not config")
        super().__init__(port=port, host=host, data_dir=data_dir, keep_data=keep_data, in_process=in_process,
                         config={**TEST_DEFAULTS, **(config or {})}, node_id=node_id, log_path=log_path,
                         start_timeout_s=start_timeout_s, clock=clock)
        if log_dirs < 1:
            raise ValueError("a broker needs at least one log dir")
        self.controller = controller
        self._log_dir_count = log_dirs
        self._owns_security = not isinstance(security, HandleSecurity)
        self.security = security if isinstance(security, HandleSecurity) else \
            HandleSecurity(security, users, host, ssl_client_auth, acls=acls)
        if controller is not None and controller.security is not None and controller.security is not self.security:
            raise ValueError("a broker of a secured controller shares its HandleSecurity (a Cluster's): the broker "
                             "logs in to the controller with it")
        self._faults: Faults | None = None
        self._state: State | None = None
        self._ui = ui or ui_port is not None
        self._ui_port = ui_port
        self._status_page: StatusPage | None = None

    def start(self) -> Broker:
        """Start the broker (see NodeHandle.start); a SASL broker's users get their SCRAM credentials at the first
        start (they live in the cluster's metadata from then on)."""
        super().start()
        self.security.add_scram_credentials(self.bootstrap_servers)
        self.security.add_initial_acls(self.bootstrap_servers)
        if self._ui and self._status_page is None:
            from minikafka.status_page import StatusPage

            self._status_page = StatusPage(self, self._ui_port)
        return self

    @property
    def ui_url(self) -> str:
        """Where the status page is served (Broker(ui=True), once started)."""
        if self._status_page is None:
            raise RuntimeError("no status page: make the handle with ui=True and start it")
        return self._status_page.url

    def properties(self) -> dict[str, str]:
        protocol = self.security.protocol
        props = {**self.config, "node.id": str(self.node_id), "listeners": f"{protocol}://{self.host}:{self._port}",
                 "log.dirs": ",".join(str(d) for d in self.log_dirs)}
        if self.controller is not None:
            props.update({"process.roles": "broker",
                          "controller.quorum.bootstrap.servers": self.controller.quorum_bootstrap_server})
        if protocol != "PLAINTEXT":
            secured_controller = self.controller is not None and self.controller.security is not None
            props.update(self.security.broker_properties(
                protocol, CONTROLLER_LISTENER if secured_controller else None))
            if self.controller is not None and not secured_controller:  # the map names every listener reached
                props["listener.security.protocol.map"] += f",{CONTROLLER_LISTENER}:PLAINTEXT"
        props.update(self.security.authorizer_properties())
        return props

    @property
    def log_dirs(self) -> list[Path]:
        """The broker's log.dirs: its data dir, or with several, `log-dir-1`, `log-dir-2`, ... in it."""
        if self._log_dir_count == 1:
            return [self.data_dir]
        return [self.data_dir / f"log-dir-{n}" for n in range(1, self._log_dir_count + 1)]

    def close(self) -> None:
        """Stop the broker, release its port and delete its temporary data dir (unless keep_data)."""
        try:
            if self._status_page is not None:
                self._status_page.close()
                self._status_page = None
            if self._state is not None:
                self._state.close()
                self._state = None
        finally:
            try:
                super().close()
            finally:
                if self._owns_security:
                    self.security.close()

    @property
    def bootstrap_servers(self) -> str:
        """HOST:PORT of the broker's listener, for a client's bootstrap.servers."""
        return self.address

    def client_config(self, user: str | None = None, client: str = "confluent", mechanism: str = "PLAIN") -> Any:
        """What a client needs to connect as `user` (default: admin): a dict of settings by the names of `client`
        ("confluent", "kafka-python", "aiokafka"), or Java client properties as text ("java")."""
        return self.security.client_config(self.bootstrap_servers, user, client, mechanism)

    def add_acls(self, *acls: Acl) -> None:
        """Create ACLs through this broker, as the admin (CreateAcls); the next request it answers obeys them."""
        self.security.add_acls(self.bootstrap_servers, acls)

    def remove_acls(self, *acls: Acl) -> None:
        """Delete exactly these ACLs through this broker, as the admin (DeleteAcls)."""
        self.security.remove_acls(self.bootstrap_servers, acls)

    @property
    def admin_password(self) -> str:
        """The password of the `admin` user every secured broker has."""
        return self.security.users["admin"]

    # ---- faults and state -----------------------------------------------------------------------------------------

    def _control(self) -> ControlClient:
        return ControlClient(self.bootstrap_servers, security=self.security.for_handle())

    def clean_logs(self, topic: str | None = None, timeout: float = 120.0) -> list[dict[str, Any]]:
        """Run a log cleaning pass on this broker now and wait for it: every compacted log (of `topic`) that Kafka's
        rules make due a cleaning is cleaned once. Returns one entry per log cleaned (topic, partition,
        first_dirty_offset, cleaned_up_to, bytes and records read and retained)."""
        control = ControlClient(self.bootstrap_servers, timeout_s=timeout, security=self.security.for_handle())
        return list(control.call("log.clean", topic=topic)["cleaned"])

    @property
    def faults(self) -> Faults:
        """Fault injection: failed requests, latency, closed connections, a full disk (see minikafka.faults)."""
        if self._faults is None:
            self._faults = Faults(self._control())
        return self._faults

    @property
    def clock(self) -> Clock:
        """The broker's manual clock (Broker(clock="manual")): `advance(ms)`, `now()` (see minikafka.clock)."""
        if self.clock_mode != "manual":
            raise RuntimeError("this broker runs on the system's clock: make it with Broker(clock=\"manual\") to "
                               "advance its time")
        return Clock(lambda: [self._control()])

    @property
    def state(self) -> State:
        """Topics, partitions (leader, ISR, HW, LEO), records and groups as this broker knows them, read over the
        network."""
        if self._state is None:
            self._state = self.new_state()
        return self._state

    def new_state(self) -> State:
        """A State of its own (its own client connections, closed by its `close()`), e.g. for another thread."""
        from minikafka.state import State  # lazy: its dataclasses would add a quarter to `import minikafka`

        return State(lambda: self.bootstrap_servers, lambda: [self._control()],
                     client_settings=self.security.client_config(self.bootstrap_servers, None, "kafka-python",
                                                                 "PLAIN"))

    def __repr__(self) -> str:
        where = self.bootstrap_servers if self._bound else "stopped"
        return f"<minikafka.Broker node {self.node_id} {where} ({self._mode()}) data {self.data_dir}>"
