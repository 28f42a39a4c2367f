"""Kafka's transaction coordinator: the transaction state of transactional ids, kept in `__transaction_state`."""
