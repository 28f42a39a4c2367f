"""One handler module per Kafka API family; each maps ApiKey members to handlers in its HANDLERS, and its docstring
says which versions of each API it serves and what changes between them. `controller_requests` (a ZooKeeper-mode
broker's control-plane APIs) maps them in its CONTROL_PLANE_HANDLERS instead, served apart from MODULES (the wiring
imports it in ZooKeeper mode)."""
from minikafka.broker.server.handlers import (
    acls,
    api_versions,
    client_quotas,
    cluster,
    configs,
    control,
    fetch,
    groups,
    log_dirs,
    metadata,
    offsets,
    produce,
    reassignments,
    sasl,
    scram_credentials,
    share,
    share_groups,
    share_state,
    topics,
    transactions,
)

MODULES = [api_versions, metadata, produce, fetch, offsets, topics, reassignments, configs, client_quotas,
           scram_credentials, cluster, groups, log_dirs, transactions, sasl, acls, control,
           share, share_state, share_groups]
