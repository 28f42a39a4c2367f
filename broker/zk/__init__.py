"""Kafka's ZooKeeper mode: the znodes it keeps (zk_data) and the client that reads and writes them (kafka_zk_client)."""
