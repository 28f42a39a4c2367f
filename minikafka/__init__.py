"""minikafka: a Kafka-protocol-compatible broker.

`minikafka.Broker` and `minikafka.Cluster` start real brokers for tests and scripts; `minikafka serve` runs one
from the command line. Importing this package is cheap: the broker itself loads only when one starts.
"""
from minikafka.broker_handle import Broker
from minikafka.cluster_handle import Cluster

__all__ = ["Broker", "Cluster"]
