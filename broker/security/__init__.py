"""Kafka's security: TLS, SASL, principals."""
