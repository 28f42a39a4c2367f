"""minikafka: a Kafka-protocol-compatible broker.

`minikafka.Broker` and `minikafka.Cluster` (a controller and several brokers, or with `zookeeper=True` a ZooKeeper
server and brokers any of which may be controller) start real brokers for tests and scripts; `minikafka serve`
runs one node from the command line, `minikafka cluster` a whole cluster. `minikafka.ZooKeeperServer` runs a local
ZooKeeper from the machine's installation (ZooKeeperNotInstalled, naming the package, where there is none).
Importing this package is cheap: the broker itself loads only when one starts.
"""
from minikafka.broker_handle import Broker
from minikafka.cluster_handle import Cluster
from minikafka.zookeeper_server import ZooKeeperNotInstalled, ZooKeeperServer

__all__ = ["Broker", "Cluster", "ZooKeeperNotInstalled", "ZooKeeperServer"]
