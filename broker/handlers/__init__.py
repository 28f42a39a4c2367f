"""One handler module per Kafka API family; each maps ApiKey members to handlers in its HANDLERS, and its docstring
says which versions of each API it serves and what changes between them."""
from . import api_versions, cluster, configs, control, fetch, groups, metadata, offsets, produce, topics

MODULES = [api_versions, metadata, produce, fetch, offsets, topics, configs, cluster, groups, control]
