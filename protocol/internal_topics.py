"""The names (and fixed ids) of Kafka's internal topics (Kafka's `Topic`), in one place below every layer that
treats them apart: the coordinators write to `__consumer_offsets`, `__transaction_state` and `__share_group_state`,
auto topic creation makes them, the log manager and the controller keep `__cluster_metadata` apart from the
partitions brokers host."""

import uuid

GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # KRaft's fixed id of `__cluster_metadata`
