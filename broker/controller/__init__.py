"""The cluster's controller, as Kafka's KRaft controller for a quorum of one: the metadata log and image, broker
registrations, sessions and fencing, topics, partitions, leaders and ISRs, and the APIs brokers reach it by."""
from minikafka.broker.controller.controller_apis import ControllerApis
from minikafka.broker.controller.controller_config import QuorumControllerConfig
from minikafka.broker.controller.controller_server import ControllerServer
from minikafka.broker.controller.quorum_controller import QuorumController

__all__ = ["ControllerApis", "ControllerServer", "QuorumController", "QuorumControllerConfig"]
