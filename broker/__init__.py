"""The broker, in Kafka's own packages, each layer using only those below it (the import contract in pyproject.toml):
kafka_node (a node by its roles) > server (request dispatch, handlers) > zk (ZooKeeper mode) > controller >
coordinator | faults > replication > metadata > log > network."""
