"""The ZooKeeper-mode controller (Kafka's KafkaController): any broker may be elected through /controller, and
its decisions are the quorum controller's, kept in ZooKeeper's znodes and sent to the brokers as LeaderAndIsr,
UpdateMetadata and StopReplica."""
