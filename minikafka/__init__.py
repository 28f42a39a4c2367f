"""minikafka: a Kafka-protocol-compatible broker.

`minikafka.Broker` and `minikafka.Cluster` (a controller and several brokers, or with `zookeeper=True` a ZooKeeper
server and brokers any of which may be controller) start real brokers for tests and scripts; `minikafka serve`
runs one node from the command line, `minikafka cluster` a whole cluster. `minikafka.ZooKeeperServer` runs a local
ZooKeeper from the machine's installation (ZooKeeperNotInstalled, naming the package, where there is none).
Importing this package is cheap: the broker itself loads only when one starts.
"""
from pathlib import Path

# In a source checkout the subpackages are this folder's siblings (pyproject.toml's package-dir maps them), and a
# script, `python -m pytest` or a node's `python -m minikafka` started from the checkout's root imports this folder
# ahead of any installed copy; so the checkout itself must be whole. An installed copy has no pyproject.toml beside it.
_CHECKOUT = Path(__file__).resolve().parent.parent
if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "broker" / "kafka_node.py").is_file():
    __path__.append(str(_CHECKOUT))

from minikafka.acl import Acl  # noqa: E402 - after the checkout's path above
from minikafka.broker_handle import Broker  # noqa: E402 - after the checkout's path above
from minikafka.cluster_handle import Cluster  # noqa: E402 - after the checkout's path above
from minikafka.zookeeper_server import ZooKeeperNotInstalled, ZooKeeperServer  # noqa: E402 - after the checkout's path above

__all__ = ["Acl", "Broker", "Cluster", "ZooKeeperNotInstalled", "ZooKeeperServer"]
