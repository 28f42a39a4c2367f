"""KIP-951's leader hints: an answer that sends a client away names the current leaders and their endpoints, so
the client moves to them without first asking for metadata (Produce v10+, Fetch v16+)."""
from __future__ import annotations

from typing import Any

from minikafka.broker.server.broker_services import RequestContext


def node_endpoints(ctx: RequestContext, node_endpoint: Any, leaders: set[int]) -> list:
    """The endpoints of `leaders` this broker knows, as the response's NodeEndpoint entries."""
    out = []
    for leader in sorted(leaders):
        # The endpoint on the listener the client came in on, not the inter-broker one.
        endpoint = ctx.services.metadata_cache.leader_endpoint(leader, ctx.conn.listener)
        if endpoint is not None:
            out.append(node_endpoint(node_id=leader, host=endpoint.host, port=endpoint.port, rack=None))
    return out
