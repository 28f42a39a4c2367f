"""Kafka's ZooKeeper mode, one wing: the ZooKeeper client, the znodes it keeps, the ZooKeeper-mode controller and
the broker's ZooKeeper metadata source and controller channel."""
