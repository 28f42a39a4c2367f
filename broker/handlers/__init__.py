"""One handler module per Kafka API family; each maps API keys to handlers in its HANDLERS."""
from . import api_versions, cluster, configs, control, fetch, groups, metadata, offsets, produce, topics

MODULES = [api_versions, metadata, produce, fetch, offsets, topics, configs, cluster, groups, control]
