"""Sans-IO partition storage in Kafka's on-disk format."""
