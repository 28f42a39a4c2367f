"""The classic consumer group coordinator (Kafka's GroupCoordinator) and its state in __consumer_offsets."""
