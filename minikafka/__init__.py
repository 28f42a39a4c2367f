"""minikafka: a Kafka-protocol-compatible broker."""
