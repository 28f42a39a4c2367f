"""minikafka: a Kafka-protocol-compatible broker.

`minikafka.Broker` and `minikafka.Cluster` (a controller and several brokers) start real brokers for tests and
scripts; `minikafka serve` runs one node from the command line, `minikafka cluster` a whole cluster. Importing
this package is cheap: the broker itself loads only when one starts.
"""
from minikafka.broker_handle import Broker
from minikafka.cluster_handle import Cluster

__all__ = ["Broker", "Cluster"]
