"""Cut links between nodes: a network partition, one way or both, that leaves client connections alone.

A node whose link to node N is cut behaves as if the network dropped what goes between them:
- every request it would send N fails as unreachable: replica fetchers' network clients and the channels to the
  controller ask `is_cut` before each attempt;
- every inter-broker or control-plane request that comes from N is refused before anything acts on it, its
  connection closed: a Fetch, OffsetForLeaderEpoch or ListOffsets carrying N's replica id, a BrokerRegistration,
  BrokerHeartbeat, AlterPartition or AllocateProducerIds of broker N.
Client requests name no node, so client connections (the control API's included) are never touched.

A cut both ways is this fault on each end. The end asked for it sets the other end's half through that node's
control API first (so nothing is cut when the other end cannot be reached), and heals it there too, connecting as
the other end's listener asks (`peer_security`: a broker's inter-broker listener, a controller's listener).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minikafka.broker.faults.peer_control import call_control
from minikafka.broker.faults.rules import FaultError
from minikafka.broker.security.client_security import ClientChannelSecurity
from minikafka.protocol.api_keys import ApiKey

log = logging.getLogger("minikafka.faults")

# Requests that name their sender as the broker they come from, and those that name it as a replica (a follower
# broker, when 0 or more; a consumer sends -1).
BROKER_ID_APIS = (ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT, ApiKey.ALTER_PARTITION,
                  ApiKey.ALLOCATE_PRODUCER_IDS)
REPLICA_ID_APIS = (ApiKey.FETCH, ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.LIST_OFFSETS)

# How this node's connections to node N's control API are secured (None: PLAINTEXT).
PeerSecurity = Callable[[int], ClientChannelSecurity | None]


def sender_node(api_key: int, request: Any) -> int | None:
    """The node that sent an inter-broker or control-plane request, or None for a client's request."""
    if api_key in BROKER_ID_APIS:
        return int(request.broker_id)
    if api_key not in REPLICA_ID_APIS:
        return None
    state = getattr(request, "replica_state", None)
    replica_id = state.replica_id if state is not None else getattr(request, "replica_id", None)
    return replica_id if replica_id is not None and replica_id >= 0 else None


@dataclass
class CutLink:
    id: int
    to: int
    both_ways: bool
    peer: tuple[str, int] | None = None  # the other end's control API, when this end set its half too
    peer_fault_id: int | None = None
    hits: int = 0  # requests to the other node failed, and requests from it refused, at this end

    def describe(self) -> dict[str, Any]:
        return {"kind": "link", "id": self.id, "to": self.to, "both_ways": self.both_ways,
                "peer_fault_id": self.peer_fault_id, "hits": self.hits}


class LinkFaults:
    def __init__(self, peer_security: PeerSecurity = lambda node_id: None) -> None:
        self._peer_security = peer_security
        self.cut_links: list[CutLink] = []
        # A controller known only by address (controller.quorum.bootstrap.servers) is node -1 to this node's
        # channels; its node id, learned when a link to it is cut, says whether such a channel is cut.
        self.controller_ids: set[int] = set()

    def is_cut(self, node_id: int) -> bool:
        """Whether requests to `node_id` must fail as if it were unreachable; the cut link counts a hit."""
        link = self._link_to(node_id)
        if link is not None:
            link.hits += 1
        return link is not None

    def _link_to(self, node_id: int) -> CutLink | None:
        if node_id < 0:
            return next((link for link in self.cut_links if link.to in self.controller_ids), None)
        return next((link for link in self.cut_links if link.to == node_id), None)

    def refusal(self, api_key: int, request: Any) -> str | None:
        """Why a request must be refused unanswered (it comes from a node cut off from this one), or None."""
        if not self.cut_links:
            return None
        sender = sender_node(api_key, request)
        if sender is None or not self.is_cut(sender):
            return None
        return f"{ApiKey(api_key).api_name} from node {sender} refused: the link to it is cut"

    async def cut(self, fault_id: int, own_id: int, to: int, peer: tuple[str, int], both_ways: bool) -> CutLink:
        """Cut the link to node `to`, whose control API is at `peer`; both ways, node `to` cuts its link here."""
        existing = next((link for link in self.cut_links if link.to == to), None)
        if existing is not None:
            raise FaultError(f"the link to node {to} is already cut (fault {existing.id})")
        link = CutLink(fault_id, to, both_ways)
        if both_ways:
            answer = await call_control(to, peer, "fault.add", self._peer_security(to), kind="link", to=own_id,
                                        both_ways=False)
            link = CutLink(fault_id, to, both_ways, peer, int(answer["fault"]["id"]))
        self.cut_links.append(link)
        log.warning("fault added: %s", link.describe())
        return link

    async def heal(self, rule_id: int | None = None) -> int:
        """Heal every cut link (or the one with this fault id), at both ends of those cut both ways; returns how
        many. An other end that cannot be reached has lost its half already (a restarted node forgets its faults)
        or keeps it until healed there; either way this end is healed."""
        healed = [link for link in self.cut_links if rule_id is None or link.id == rule_id]
        self.cut_links = [link for link in self.cut_links if link not in healed]
        for link in healed:
            log.warning("link to node %d healed (fault %d)", link.to, link.id)
            if link.peer is not None:
                try:
                    await call_control(link.to, link.peer, "fault.clear", self._peer_security(link.to), kind="link",
                                       id=link.peer_fault_id)
                except FaultError as exc:
                    log.warning("healing the link to node %d at its end failed: %s", link.to, exc)
        return len(healed)

    def describe(self) -> list[dict[str, Any]]:
        return [link.describe() for link in self.cut_links]
