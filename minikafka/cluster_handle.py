"""`minikafka.Cluster`: a controller and N brokers, each a real process, handled as one Kafka cluster.

    with minikafka.Cluster(brokers=3) as cluster:
        cluster.state.create_topic("t", partitions=1, replication_factor=3)
        leader = cluster.leader_of("t", 0)                           # a minikafka.Broker
        leader.kill()                                                # kill -9
        cluster.wait_for_leader("t", 0, not_on=leader)               # another replica leads
        leader.start()
        cluster.wait_for_isr("t", 0, 3)                              # it caught up and rejoined
        cluster.state.partition("t", 0).log_end_offsets              # every replica's log end offset
        with cluster.cut_link(1, cluster.controller):                # a network partition, healed on exit
            ...
        cluster.move_leader("t", 0, to=2)                            # undo: cluster.elect_preferred_leaders()

As Kafka's KRaft test clusters run: one controller-only node (node id 3000, its own port, metadata log and log
file) and brokers 1..N (`process.roles=broker`) that find it by `controller.quorum.bootstrap.servers`. The
brokers start in parallel once the controller is up. Each node keeps its port and data across restarts.

ZooKeeper mode (`zookeeper=True`), as Kafka's ZooKeeper-era test clusters: a ZooKeeper server of the cluster's own
(`cluster.zookeeper`, data and log under the cluster's data dir, at the root of its tree) and brokers 1..N with
`zookeeper.connect`; no controller process: every broker campaigns, and `cluster.controller` is the broker that
is controller now. `zookeeper_connect="host:port/chroot"` uses an existing ensemble instead (give each cluster a
chroot of its own there); `cluster.zookeeper` is then None.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from minikafka.broker_handle import Broker
from minikafka.clock import Clock
from minikafka.control_client import ControlClient, ControlError
from minikafka.controller_handle import CONTROLLER_NODE_ID, Controller
from minikafka.faults import Fault, Faults
from minikafka.handle_security import HandleSecurity
from minikafka.local_server import StartedInWith
from minikafka.node_handle import DEFAULT_START_TIMEOUT_S, DEFAULT_WAIT_S, NodeHandle
from minikafka.protocol.schema_loading import quiet_schema_loading
from minikafka.state_waits import StateWaits

if TYPE_CHECKING:
    from minikafka.acl import Acl
    from minikafka.state import PartitionState, State
    from minikafka.status_page import StatusPage
    from minikafka.zookeeper_server import ZooKeeperServer
    from minikafka.zookeeper_state import ZooKeeperState

# The cluster decides these: every broker is a broker-only node of this cluster's controller.
CLUSTER_PROPERTIES = ("process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
                      "controller.listener.names", "zookeeper.connect")
WAIT_INTERVAL_S = 0.02
T = TypeVar("T")


def cluster_test_defaults(brokers: int) -> dict[str, str]:
    """Quick failure detection and failover for tests, in the spirit of Kafka's own integration-test clusters
    (KRaftClusterTest: heartbeat 10 ms / session 1 s; IsrExpirationTest: lag 100 ms / fetch wait 100 ms;
    TestUtils: replica socket timeout 1.5 s), kept a little looser so a busy two-core machine does not fence
    or shrink on a scheduling hiccup:
    - a broker heartbeats every 100 ms and is fenced after 1 s without one (a killed broker at once: its
      controller connection closes), so a SIGSTOPped broker loses its leaderships within about a second;
    - a follower that has not caught up for 1 s leaves the ISR (checked every 500 ms: out within 1.5 s);
    - an idle follower long-polls for 100 ms, so a HW move reaches it within 100 ms, and retries 100 ms after
      an error (a dead leader) instead of Kafka's 1 s;
    - topics (and __consumer_offsets) get min(3, N) replicas; min.insync.replicas stays Kafka's 1.
    """
    replication = str(min(3, brokers))
    return {
        "broker.heartbeat.interval.ms": "100",
        "broker.session.timeout.ms": "1000",
        "replica.lag.time.max.ms": "1000",
        "replica.fetch.wait.max.ms": "100",
        "replica.fetch.backoff.ms": "100",
        "replica.socket.timeout.ms": "1500",
        "default.replication.factor": replication,
        "offsets.topic.replication.factor": replication,
    }


def zookeeper_test_defaults() -> dict[str, str]:
    """What ZooKeeper mode adds to `cluster_test_defaults`: a ZooKeeper session of 2 s (Kafka's default is 18 s;
    the server's 500 ms tick allows down to 1 s), so a killed or paused broker is dead to the controller, and a
    killed controller replaced, within about two seconds, with room for a busy machine's hiccups."""
    return {"zookeeper.session.timeout.ms": "2000"}


class Cluster(StateWaits, StartedInWith):
    """A handle on a controller and its brokers. Not started until `start()` or `with`; `close()` stops them."""

    def __init__(self, brokers: int = 1, *, ports: list[int] | None = None, controller_port: int | None = None,
                 host: str = "127.0.0.1", data_dir: str | Path | None = None, keep_data: bool = False,
                 in_process: bool = False, config: Mapping[str, object] | None = None,
                 controller_config: Mapping[str, object] | None = None,
                 start_timeout_s: float = DEFAULT_START_TIMEOUT_S, zookeeper: bool = False,
                 zookeeper_connect: str | None = None, zookeeper_port: int | None = None,
                 log_dirs: int = 1, security: str = "PLAINTEXT", users: Mapping[str, str] | None = None,
                 ssl_client_auth: str = "none", acls: Sequence[Acl] | None = None, ui: bool = False,
                 ui_port: int | None = None, clock: str = "system") -> None:
        """
        brokers: how many brokers (node ids 1..n). ports: one listener port per broker (default: free ones);
        controller_port likewise. data_dir: parent of each node's data dir (`broker-<id>`, `controller-3000`) and
        log file (`broker-<id>.log`, ...), temporary by default. in_process: every node on a thread of this
        process (no pause/resume then).
        config: properties by Kafka's names for every node, over the test defaults (`cluster_test_defaults`); the
        controller gets them too, since topic defaults (num.partitions, default.replication.factor,
        min.insync.replicas, ...) and broker.session.timeout.ms are the controller's to apply.
        controller_config: properties for the controller only, over `config`.
        zookeeper: ZooKeeper mode with a ZooKeeper server of this cluster's own (`zookeeper_port`, default a free
        port; ZooKeeperNotInstalled, naming the Debian/Ubuntu package, when the machine has none);
        zookeeper_connect: ZooKeeper mode on an existing ensemble, HOST:PORT[,...][/chroot]. Either way there is
        no controller process (controller_port and controller_config do not apply) and `config` goes to every
        broker, each of which may become controller.
        log_dirs: how many log dirs each broker has (JBOD; `Broker.log_dirs` names them).
        security, users, ssl_client_auth: every broker's listener secured as `Broker` secures one, with one CA and
        the same users (`client_config`); the brokers reach each other and the controller's listener, secured
        alike, as `admin`: no listener is plaintext.
        acls: Kafka's StandardAuthorizer on every broker, `admin` its super user, with these ACLs created at the
        first start (see Broker).
        clock: "system", or "manual": one clock the test advances on every node together (`clock.advance(ms)`),
        for tests only (see minikafka.clock and docs/virtual-time.md).
        """
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if ports is not None and len(ports) != brokers:
            raise ValueError(f"{len(ports)} ports given for {brokers} brokers")
        owned = [name for name in {**(config or {}), **(controller_config or {})} if name in CLUSTER_PROPERTIES]
        if owned:
            raise ValueError(f"{', '.join(owned)}: set by the cluster (its brokers find its controller; ZooKeeper "
                             "mode through Cluster(zookeeper=True) or Cluster(zookeeper_connect=...))")
        self.zookeeper_mode = zookeeper or zookeeper_connect is not None
        if zookeeper and zookeeper_connect is not None:
            raise ValueError("zookeeper=True starts a ZooKeeper server of the cluster's own; zookeeper_connect "
                             "uses an existing one: give one of them")
        if self.zookeeper_mode and (controller_config or controller_port is not None):
            raise ValueError("ZooKeeper mode has no controller process: every broker may become controller, so "
                             "controller properties go in `config`")
        self.keep_data = keep_data
        self._temp_root: Path | None = None
        if data_dir is None:
            root = self._temp_root = Path(tempfile.mkdtemp(prefix="minikafka-cluster-"))
        else:
            root = Path(data_dir).absolute()
        self.data_dir = root
        defaults = cluster_test_defaults(brokers)
        self.security = HandleSecurity(security, users, host, ssl_client_auth, acls=acls)
        self.zookeeper: ZooKeeperServer | None = None
        self._controller: Controller | None = None
        self._zookeeper_connect = zookeeper_connect
        if self.zookeeper_mode:
            defaults.update(zookeeper_test_defaults())
            if zookeeper:
                from minikafka.zookeeper_server import ZooKeeperServer

                self.zookeeper = ZooKeeperServer(port=zookeeper_port, data_dir=root / "zookeeper", keep_data=True,
                                                 host=host, start_timeout_s=start_timeout_s)
        else:
            controller_name = f"controller-{CONTROLLER_NODE_ID}"
            self._controller = Controller(port=controller_port, host=host, data_dir=root / controller_name,
                                          keep_data=True, in_process=in_process,
                                          config={**defaults, **(config or {}), **(controller_config or {})},
                                          log_path=root / f"{controller_name}.log", start_timeout_s=start_timeout_s,
                                          security=self.security, clock=clock)
        shared = {**defaults, **(config or {})}
        self.brokers: list[Broker] = [
            Broker(port=ports[i] if ports else None, host=host, data_dir=root / f"broker-{i + 1}", keep_data=True,
                   in_process=in_process, config=shared, node_id=i + 1, log_path=root / f"broker-{i + 1}.log",
                   start_timeout_s=start_timeout_s, controller=self._controller, log_dirs=log_dirs,
                   security=self.security, clock=clock)
            for i in range(brokers)
        ]
        self._state: State | None = None
        self._zookeeper_state: ZooKeeperState | None = None
        self._ui = ui or ui_port is not None
        self._ui_port = ui_port
        self._status_page: StatusPage | None = None

    @property
    def nodes(self) -> list[NodeHandle]:
        """The controller process, then the brokers (in ZooKeeper mode the brokers alone)."""
        return [*([self._controller] if self._controller is not None else []), *self.brokers]

    @property
    def clock(self) -> Clock:
        """The cluster's manual clock (Cluster(clock="manual")): `advance(ms)` moves every running node's clock,
        the controller's first, then each broker's; `now()` reads the first broker's (see minikafka.clock)."""
        if any(node.clock_mode != "manual" for node in self.nodes):
            raise RuntimeError("this cluster runs on the system's clock: make it with Cluster(clock=\"manual\") to "
                               "advance its time")

        def controls() -> list[ControlClient]:
            running = [node for node in self.nodes if node.running]
            controllers = [node.control() for node in running if isinstance(node, Controller)]
            return controllers + [node._control() for node in running if isinstance(node, Broker)]

        return Clock(controls)

    @property
    def controller(self) -> Controller | Broker:
        """The controller: the controller process, or in ZooKeeper mode the broker that is controller now, as
        /controller names it (LookupError while no broker is; `wait_for_controller` waits for one)."""
        if self._controller is not None:
            return self._controller
        controller_id = self.zookeeper_state.controller_id()
        if controller_id is None:
            raise LookupError("no broker is controller now (/controller is absent)")
        return self.broker(controller_id)

    @property
    def zookeeper_connect(self) -> str:
        """The brokers' zookeeper.connect (ZooKeeper mode only)."""
        if self._zookeeper_connect is not None:
            return self._zookeeper_connect
        if self.zookeeper is None:
            raise RuntimeError("this cluster runs the KRaft controller, not ZooKeeper mode")
        return self.zookeeper.connect_string

    @property
    def zookeeper_state(self) -> ZooKeeperState:
        """What the cluster keeps in ZooKeeper (controller, controller epoch, live brokers, partition states)."""
        from minikafka.zookeeper_state import ZooKeeperState  # lazy: kazoo is slow to import, and ZooKeeper rare

        if self._zookeeper_state is None:
            self._zookeeper_state = ZooKeeperState(self.zookeeper_connect)
        return self._zookeeper_state

    # ---- lifecycle ----------------------------------------------------------------------------------------------

    def start(self, on_ready: Callable[[NodeHandle], None] | None = None) -> Cluster:
        """Start the controller, then every broker at once; return when all are ready.

        on_ready: called (on this thread) with each node's handle as it becomes ready, the controller first.
        A node that fails to start raises its BrokerStartError once the others have finished starting.
        In ZooKeeper mode the cluster's ZooKeeper server starts first (on_ready is not called for it).
        """
        from concurrent.futures import ThreadPoolExecutor, as_completed

        if self.zookeeper is not None:
            self.zookeeper.start()
        if self.zookeeper_mode:
            for broker in self.brokers:
                broker.config["zookeeper.connect"] = self.zookeeper_connect
        if self._controller is not None:
            self._controller.start()
            if on_ready is not None:
                on_ready(self._controller)
        errors: list[BaseException] = []
        with ThreadPoolExecutor(max_workers=len(self.brokers), thread_name_prefix="minikafka-start") as pool:
            futures = {pool.submit(broker.start): broker for broker in self.brokers}
            for future in as_completed(futures):
                error = future.exception()
                if error is not None:
                    errors.append(error)
                elif on_ready is not None:
                    on_ready(futures[future])
        if errors:
            raise errors[0]
        if self._ui and self._status_page is None:
            from minikafka.status_page import StatusPage

            self._status_page = StatusPage(self, self._ui_port)
        return self

    def stop(self) -> None:
        """Clean shutdown of every broker, one after the other (each hands its leaderships to the others first,
        Kafka's controlled shutdown), then of the controller, or of the cluster's ZooKeeper server."""
        errors = []
        for node in [*reversed(self.brokers), *([self._controller] if self._controller is not None else [])]:
            try:
                node.stop()
            except Exception as exc:  # noqa: BLE001 - stop the others, then report
                errors.append(exc)
        if self._zookeeper_state is not None:
            self._zookeeper_state.close()
            self._zookeeper_state = None
        if self.zookeeper is not None:
            try:
                self.zookeeper.stop()
            except Exception as exc:  # noqa: BLE001 - report the first error
                errors.append(exc)
        if errors:
            raise errors[0]

    def close(self) -> None:
        """Stop every node, release their ports and delete the temporary data (unless keep_data)."""
        try:
            if self._status_page is not None:
                self._status_page.close()
                self._status_page = None
            if self._state is not None:
                self._state.close()
                self._state = None
            self.stop()
        finally:
            for node in self.nodes:
                node.close()
            if self.zookeeper is not None:
                self.zookeeper.close()
            if self._temp_root is not None and not self.keep_data:
                shutil.rmtree(self._temp_root, ignore_errors=True)
            self.security.close()

    # ---- brokers ------------------------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """The brokers a client can reach now: running and not paused."""
        return ",".join(b.bootstrap_servers for b in self._reachable())

    def client_config(self, user: str | None = None, client: str = "confluent", mechanism: str = "PLAIN") -> Any:
        """What a client needs to connect to the brokers as `user` (see Broker.client_config)."""
        return self.security.client_config(self.bootstrap_servers, user, client, mechanism)

    def add_acls(self, *acls: Acl) -> None:
        """Create ACLs as the admin (CreateAcls through a reachable broker); every broker obeys them once its
        metadata has them (at once on the broker that took the request)."""
        self.security.add_acls(self.bootstrap_servers, acls)

    def remove_acls(self, *acls: Acl) -> None:
        """Delete exactly these ACLs, as the admin (DeleteAcls)."""
        self.security.remove_acls(self.bootstrap_servers, acls)

    def _reachable(self) -> list[Broker]:
        return [b for b in self.brokers if b.running and not b.paused]

    def clean_logs(self, topic: str | None = None, timeout: float = 120.0) -> dict[int, list[dict[str, Any]]]:
        """Run a log cleaning pass now on every running broker (each replica cleans its own log, as in Kafka) and
        wait for them; returns what each broker cleaned, by node id (see Broker.clean_logs)."""
        return {b.node_id: b.clean_logs(topic, timeout) for b in self._reachable()}

    def broker(self, node_id: int) -> Broker:
        for broker in self.brokers:
            if broker.node_id == node_id:
                return broker
        raise KeyError(f"no broker with node id {node_id}")

    def leader_of(self, topic: str, partition: int) -> Broker:
        """The broker leading a partition now, as the running brokers' metadata says (the newest leader epoch).
        LookupError when none leads it (use wait_for_leader)."""
        state = self.state.partition(topic, partition)
        if state.leader < 0:
            raise LookupError(f"{topic}-{partition} has no leader now (leader epoch {state.leader_epoch}, "
                              f"ISR {state.isr})")
        return self.broker(state.leader)

    def coordinator_of(self, group_id: str) -> Broker:
        """The broker coordinating a group now (FindCoordinator of the running brokers); it knows the group once
        it exists, as any group id has a coordinator."""
        return self.broker(self.state.coordinator(group_id))

    def node(self, node: NodeHandle | int) -> NodeHandle:
        """A broker or the controller, by handle or node id."""
        if isinstance(node, NodeHandle):
            return node
        if self._controller is not None and node == self._controller.node_id:
            return self._controller
        return self.broker(node)

    # ---- replication faults -------------------------------------------------------------------------------------

    def cut_link(self, a: NodeHandle | int, b: NodeHandle | int, both_ways: bool = True) -> Fault:
        """A network partition between nodes `a` and `b` (brokers or the controller, by handle or node id): the
        inter-broker and broker-controller requests between them fail, client connections do not. A broker cut
        off from the controller cannot heartbeat and is fenced when its session times out.

        Both ways (the default) each end cuts its link to the other; one way only `a` does: its requests to `b`
        fail, and it refuses those `b` sends it, so `b` finds only silence. `clear()` on the returned fault (or
        leaving its `with` block) heals both ends.
        """
        return self._faults_of(self.node(a)).cut_link(b.node_id if isinstance(b, NodeHandle) else b, both_ways)

    def _faults_of(self, node: NodeHandle) -> Faults:
        if isinstance(node, Broker):
            return node.faults
        assert isinstance(node, Controller), node
        return Faults(node.control())

    def move_leader(self, topic: str, partition: int, to: Broker | int, timeout: float = DEFAULT_WAIT_S) -> Broker:
        """Move the partition's leadership to broker `to`, through the controller, and return `to` once it leads.

        `to` must be in the ISR and live (any other move could lose acknowledged records; the controller refuses
        it with ControlError saying why); the leader epoch goes up by one, as in any election. Kafka moves
        leadership only to the preferred replica, so the undo is `elect_preferred_leaders()`.
        A move goes through the controller process's control API, so a ZooKeeper-mode cluster has none: there,
        elect_preferred_leaders() moves leaderships, as Kafka's tools do.
        """
        if self._controller is None:
            raise NotImplementedError("move_leader() needs the controller process of a KRaft cluster; in ZooKeeper "
                                      "mode move leaderships with elect_preferred_leaders()")
        target = to.node_id if isinstance(to, Broker) else to
        moved = self._controller.control().call("leader.move", topic=topic, partition=partition, to=target)

        def check() -> tuple[Broker | None, object]:
            state = self.state.partition(topic, partition)
            led = state.leader == target and state.leader_epoch >= moved["leader_epoch"]
            return (self.broker(target) if led and state.high_watermark is not None else None), state

        return self._wait(check, f"broker {target} to lead {topic}-{partition}", timeout)

    def elect_preferred_leaders(self, topic: str | None = None, partition: int | None = None,
                                timeout: float = DEFAULT_WAIT_S) -> list[tuple[str, int]]:
        """ElectLeaders PREFERRED (what kafka-leader-election.sh does) for one partition, a topic's or all; returns
        the partitions whose leadership moved, once their preferred replica leads each of them."""
        with quiet_schema_loading():
            from kafka import KafkaAdminClient

        wanted: dict[str, list[int]] | list[str] | None = None
        if topic is not None:
            wanted = {topic: [partition]} if partition is not None else [topic]
        admin = KafkaAdminClient(**self.security.client_config(self.bootstrap_servers, None, "kafka-python", "PLAIN"))
        try:
            response = admin.elect_leaders(0, wanted)
        finally:
            admin.close()
        elected = [(result.topic, p.partition_id) for result in response.replica_election_results
                   for p in result.partition_result if p.error_code == 0]
        for t, index in elected:
            def check(t: str = t, index: int = index) -> tuple[PartitionState | None, object]:
                state = self.state.partition(t, index)
                preferred = state.replicas[0] if state.replicas else None
                return (state if state.leader == preferred and state.high_watermark is not None else None), state

            self._wait(check, f"the preferred replica to lead {t}-{index}", timeout)
        return elected

    @property
    def state(self) -> State:
        """Cluster-wide state, asked of every reachable broker at each call (see minikafka.state)."""
        if self._state is None:
            self._state = self.new_state()
        return self._state

    def new_state(self) -> State:
        """A State of its own (its own client connections, closed by its `close()`), e.g. for another thread."""
        from minikafka.state import State  # lazy: its dataclasses would add a quarter to `import minikafka`

        return State(lambda: self.bootstrap_servers, lambda: [b._control() for b in self._reachable()],
                     client_settings=self.security.client_config("", None, "kafka-python", "PLAIN"))

    @property
    def ui_url(self) -> str:
        """Where the status page is served (Cluster(ui=True), once started)."""
        if self._status_page is None:
            raise RuntimeError("no status page: make the handle with ui=True and start it")
        return self._status_page.url

    # ---- waits --------------------------------------------------------------------------------------------------

    def wait_for_isr(self, topic: str, partition: int, size: int, timeout: float = DEFAULT_WAIT_S) -> PartitionState:
        """Until the partition's leader reports an ISR of exactly `size` replicas."""
        def check() -> tuple[PartitionState | None, object]:
            state = self.state.partition(topic, partition)
            return (state if state.high_watermark is not None and len(state.isr) == size else None), state

        return self._wait(check, f"the ISR of {topic}-{partition} to have {size} replica(s)", timeout)

    def wait_for_leader(self, topic: str, partition: int, timeout: float = DEFAULT_WAIT_S,
                        not_on: Broker | int | None = None) -> Broker:
        """Until a reachable broker leads the partition (and says so itself), other than `not_on` if given."""
        avoid = not_on.node_id if isinstance(not_on, Broker) else not_on

        def check() -> tuple[Broker | None, object]:
            state = self.state.partition(topic, partition)
            if state.high_watermark is None or state.leader < 0 or state.leader == avoid:
                return None, state
            return self.broker(state.leader), state

        what = f"a leader of {topic}-{partition}" + (f" other than broker {avoid}" if avoid is not None else "")
        return self._wait(check, what, timeout)

    def wait_for_controller(self, timeout: float = DEFAULT_WAIT_S, not_on: Broker | int | None = None) -> Broker:
        """ZooKeeper mode: until a broker (other than `not_on` if given) is controller and every running broker
        that is not paused names it as controller in its Metadata (the new controller has told them)."""
        if self._controller is not None:
            raise RuntimeError("a KRaft cluster's controller is its controller process: there is no election")
        avoid = not_on.node_id if isinstance(not_on, Broker) else not_on

        def check() -> tuple[Broker | None, object]:
            elected = self.zookeeper_state.controller_id()
            if elected is None or elected == avoid:
                return None, f"/controller names {elected}"
            named = self.controller_ids()
            found = self.broker(elected) if set(named.values()) == {elected} else None
            return found, f"/controller names {elected}, brokers name {named}"

        what = "a controller" + (f" other than broker {avoid}" if avoid is not None else "")
        return self._wait(check, what, timeout)

    def controller_ids(self) -> dict[int, int]:
        """The controller id each running, unpaused broker reports in its Metadata responses, by broker."""
        from minikafka.metadata_client import cluster_view  # lazy: it imports kafka-python

        admin = self.security.for_handle()
        return {broker.node_id: cluster_view(broker.bootstrap_servers, security=admin).controller_id
                for broker in self._reachable()}

    def wait_for_replicas_caught_up(self, topic: str, timeout: float = DEFAULT_WAIT_S) -> list[PartitionState]:
        """Until, in every partition of the topic, each replica's log end offset equals the leader's and the HW
        equals it too."""
        def check() -> tuple[list[PartitionState] | None, object]:
            states = self.state.partitions(topic)
            return (states if all(s.caught_up for s in states) else None), states

        return self._wait(check, f"every replica of {topic} to catch up with its leader", timeout)

    @staticmethod
    def _wait(check: Callable[[], tuple[T | None, object]], what: str, timeout: float) -> T:
        """Poll `check` (the value once there, and what it saw) until it has the value; TimeoutError naming `what`
        and the last thing seen otherwise."""
        deadline = time.monotonic() + timeout
        seen: object = "nothing"
        while True:
            last_chance = time.monotonic() >= deadline
            try:
                found, seen = check()
            except (OSError, LookupError, ControlError) as exc:  # a broker going down, no topic yet
                found, seen = None, exc
            if found is not None:
                return found
            if last_chance:
                raise TimeoutError(f"waited {timeout:g} s for {what}; last seen: {seen!r}")
            time.sleep(max(0.0, min(WAIT_INTERVAL_S, deadline - time.monotonic())))

    def __repr__(self) -> str:
        if self._controller is None:
            started = self.zookeeper is None or self.zookeeper.port
            where = f"ZooKeeper {self.zookeeper_connect if started else '(not started)'}"
        else:
            where = f"controller {self._controller.address if self._controller.running else 'stopped'}"
        return f"<minikafka.Cluster of {len(self.brokers)} broker(s) {self.bootstrap_servers or 'stopped'}, {where}>"
