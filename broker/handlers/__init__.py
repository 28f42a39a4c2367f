"""One handler module per Kafka API family; each maps ApiKey members to handlers in its HANDLERS, and its docstring
says which versions of each API it serves and what changes between them. `controller_requests` (a ZooKeeper-mode
broker's control-plane APIs) maps them in its CONTROL_PLANE_HANDLERS instead, served apart from MODULES."""
from . import (
    api_versions,
    cluster,
    configs,
    control,
    controller_requests,  # noqa: F401 - served apart from MODULES, in ZooKeeper mode
    fetch,
    groups,
    metadata,
    offsets,
    produce,
    topics,
)

MODULES = [api_versions, metadata, produce, fetch, offsets, topics, configs, cluster, groups, control]
