"""Sans-IO Kafka wire protocol: framing, codec, record-batch headers, error codes."""
