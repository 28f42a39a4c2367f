"""Partitions as leader and follower (Kafka's Partition and ReplicaManager): delayed operations, fetchers, fetch
sessions, quotas."""
