"""The cluster's controller, as Kafka's KRaft controller for a quorum of one: the metadata log and image, broker
registrations, sessions and fencing, topics, partitions, leaders and ISRs, and the APIs brokers reach it by."""
from .controller_apis import ControllerApis
from .controller_config import QuorumControllerConfig
from .controller_server import ControllerServer
from .quorum_controller import QuorumController

__all__ = ["ControllerApis", "ControllerServer", "QuorumController", "QuorumControllerConfig"]
