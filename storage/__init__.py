"""Partition storage in Kafka's on-disk format: segments, indexes, checkpoints, recovery.

Plain synchronous file I/O; no network, no trio, nothing from minikafka.broker.
"""
