"""Server-side partition assignors of KIP-848 consumer groups (Kafka's `uniform` and `range`) and what they read."""
