"""`minikafka.Cluster`: a set of brokers handled as one, with the same interface at every size.

    with minikafka.Cluster(brokers=1) as cluster:
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
        leader = cluster.leader_of("t", 0)        # a minikafka.Broker
        leader.faults.add_latency(500)
        cluster.state.partition("t", 0).isr

Replication between brokers is not available yet, so a cluster has one broker for now; the interface
(brokers by node id, the leader of a partition, cluster-wide state) is the one a multi-broker cluster keeps.
"""
from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from minikafka.broker_handle import DEFAULT_START_TIMEOUT_S, Broker

if TYPE_CHECKING:
    from minikafka.integration.state import State

MAX_BROKERS = 1


class Cluster:
    def __init__(self, brokers: int = 1, *, ports: list[int] | None = None, host: str = "127.0.0.1",
                 data_dir: str | Path | None = None, keep_data: bool = False, in_process: bool = False,
                 config: Mapping[str, object] | None = None,
                 start_timeout_s: float = DEFAULT_START_TIMEOUT_S) -> None:
        """
        brokers: how many brokers (node ids 1..n). Only 1 until replication between brokers exists.
        ports: one listener port per broker (default: free ones). data_dir: parent of each broker's data dir
        (`broker-<id>`), temporary by default. config: properties every broker gets, by Kafka's names.
        """
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if brokers > MAX_BROKERS:
            raise ValueError(f"Cluster(brokers={brokers}): replication between brokers is not available yet; "
                             f"a cluster has at most {MAX_BROKERS} broker for now")
        if ports is not None and len(ports) != brokers:
            raise ValueError(f"{len(ports)} ports given for {brokers} brokers")
        self.keep_data = keep_data
        self._temp_root: Path | None = None
        if data_dir is None:
            root = self._temp_root = Path(tempfile.mkdtemp(prefix="minikafka-cluster-"))
        else:
            root = Path(data_dir).absolute()
        self.data_dir = root
        self.brokers: list[Broker] = [
            Broker(port=ports[i] if ports else None, host=host, data_dir=root / f"broker-{i + 1}", keep_data=True,
                   in_process=in_process, config=config, node_id=i + 1, log_path=root / f"broker-{i + 1}.log",
                   start_timeout_s=start_timeout_s)
            for i in range(brokers)
        ]
        self._state: State | None = None

    def start(self) -> Cluster:
        for broker in self.brokers:
            broker.start()
        return self

    def stop(self) -> None:
        """Clean shutdown of every broker."""
        errors = []
        for broker in reversed(self.brokers):
            try:
                broker.stop()
            except Exception as exc:  # noqa: BLE001 - stop the others, then report
                errors.append(exc)
        if errors:
            raise errors[0]

    def close(self) -> None:
        """Stop every broker, release their ports and delete the temporary data (unless keep_data)."""
        try:
            if self._state is not None:
                self._state.close()
                self._state = None
            self.stop()
        finally:
            for broker in self.brokers:
                broker.close()
            if self._temp_root is not None and not self.keep_data:
                shutil.rmtree(self._temp_root, ignore_errors=True)

    def __enter__(self) -> Cluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers if b.running)

    def broker(self, node_id: int) -> Broker:
        for broker in self.brokers:
            if broker.node_id == node_id:
                return broker
        raise KeyError(f"no broker with node id {node_id}")

    def leader_of(self, topic: str, partition: int) -> Broker:
        """The broker leading a partition now."""
        return self.broker(self.state.partition(topic, partition).leader)

    @property
    def state(self) -> State:
        """Cluster-wide state: each partition as its leader reports it, with every replica's log end offset."""
        from minikafka.integration.control_client import ControlClient
        from minikafka.integration.state import State

        if self._state is None:
            self._state = State(self.bootstrap_servers,
                                [ControlClient(b.bootstrap_servers) for b in self.brokers if b.running])
        return self._state

    def __repr__(self) -> str:
        return f"<minikafka.Cluster of {len(self.brokers)} broker(s) {self.bootstrap_servers or 'stopped'}>"
