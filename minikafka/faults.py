"""Fault injection against a running broker, from Python: the client side of the broker's control API.

    broker.faults.fail_requests("Produce", "NOT_LEADER_OR_FOLLOWER", count=3)
    broker.faults.fail_requests("Fetch", "NOT_LEADER_OR_FOLLOWER", count=None, source="replica")
    with broker.faults.add_latency(2000, api="Fetch"):
        ...                                  # the latency is cleared when the block ends
    broker.faults.fill_disk()                # appends now fail with KAFKA_STORAGE_ERROR
    broker.faults.cut_link(to=2)             # a network partition between this broker and node 2
    broker.faults.pause_fetching("t", 0)     # this follower stops fetching t-0: it falls out of the ISR
    broker.faults.delay_connection(500, when={"client_id": "billing"})   # one connection's responses held back
    broker.faults.reorder_responses()        # one connection's pipelined responses answered out of order
    broker.faults.throttle_bandwidth(10_000) # responses written at 10 kB/s
    broker.faults.close_after_bytes(1000)    # a connection closed once 1000 response bytes were written to it
    broker.faults.partial_fetch()            # a Fetch answered with its last record batch cut short
    broker.faults.crash_cleaner("mid-swap")   # the broker dies (kill -9) halfway through a log cleaning's swap
    broker.faults.clear()                    # undo everything

    fault = broker.faults.fail_requests("Produce", "NOT_ENOUGH_REPLICAS", count=2)
    ...                                      # the application produces
    fault.wait(hits=2, timeout=10)           # both answered (TimeoutError, saying how many were, otherwise)
    assert fault.hits == 2

APIs are named by Kafka's names ("Produce", "Fetch", "OffsetCommit") or keys, errors by Kafka's names
("NOT_LEADER_OR_FOLLOWER") or codes. `source="replica"` selects only the requests a follower broker sends its
leader (a Fetch or OffsetForLeaderEpoch with a replica id), `source="client"` only the others; the default is both.
A broker forgets its faults when it restarts, as a real one would. A cluster's controller takes link faults too
(see `minikafka.Cluster.cut_link`).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from minikafka.control_client import ControlClient

# The kinds that count what they hit (every kind but a failed log dir and a cleaner crash, which the broker dies of),
# and how often `Fault.wait` asks the broker.
COUNTED_KINDS = ("error", "latency", "drop-response", "connection-delay", "reorder", "bandwidth", "close-after-bytes",
                 "partial-fetch", "disk", "link", "fetch-pause", "txn-markers-hold", "auth-failure", "clock-jump")
WAIT_POLL_S = 0.02


class Fault:
    """One fault; `clear()` (or leaving its `with` block) undoes it. It counts its `hits`, also once used up or
    cleared: requests an error fault answered (a latency held back, a drop-response left unanswered), responses a
    network fault delayed, swapped, paced or cut, connections a close-after-bytes closed, appends a full disk
    refused, requests a cut link failed or refused at this end, partition fetches a pause held back, times
    transaction markers were held, authentications refused. A failed log dir counts nothing."""

    def __init__(self, faults: Faults, description: dict[str, Any]) -> None:
        self._faults = faults
        self.description = description

    @property
    def id(self) -> int | None:
        return self.description.get("id")

    @property
    def kind(self) -> str:
        return self.description["kind"]

    def clear(self) -> None:
        if self.kind == "log-dir":
            return  # a failed log dir comes back only when the broker restarts
        if self.kind == "disk":
            self._faults.clear("disk")
        else:
            self._faults._control.call("fault.clear", kind=self.kind, id=self.id)

    @property
    def hits(self) -> int:
        """How many times it has applied so far (see the class)."""
        return int(self._current()["hits"])

    @property
    def skipped(self) -> int:
        """How many matching requests it has let through untouched so far (its `skip`)."""
        return int(self._current()["skipped"])

    @property
    def active(self) -> bool:
        """Whether it still applies: not used up (its count) nor cleared."""
        return bool(self._current()["active"])

    def wait(self, hits: int = 1, timeout: float = 10.0) -> Fault:
        """Until it has hit `hits` times; TimeoutError saying how many it had otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            current = self._current()
            if current["hits"] >= hits:
                return self
            if time.monotonic() >= deadline:
                state = "active" if current["active"] else "no longer active"
                raise TimeoutError(f"fault {self.id} ({self.kind}, {state}) hit {current['hits']} request(s) of the "
                                   f"{hits} waited for within {timeout:g} s")
            time.sleep(WAIT_POLL_S)

    def _current(self) -> dict[str, Any]:
        if self.kind not in COUNTED_KINDS:
            raise TypeError(f"a {self.kind} fault does not count hits")
        return self._faults._control.call("fault.get", id=self.id)["fault"]

    def __enter__(self) -> Fault:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.clear()

    def __repr__(self) -> str:
        return f"Fault({self.description})"


class Faults:
    """The faults of one node: `broker.faults` for a broker, also each one of a cluster's."""

    def __init__(self, control: ControlClient) -> None:
        self._control = control

    def fail_requests(self, api: str | int, error: str | int, count: int | None = 1, *, topic: str | None = None,
                      partition: int | None = None, source: str | None = None,
                      when: dict[str, Any] | None = None, skip: int = 0) -> Fault:
        """Answer the next `count` requests of `api` (None: all until cleared) with `error`, after letting `skip`
        matching requests through (skip=2: the third fails).

        With `topic` (and `partition`), only that topic's (partition's) entries of a request fail, the rest of the
        request is served normally. Failed requests are not carried out: nothing is appended or committed.
        `source` ("replica" or "client") limits the fault to requests from follower brokers or from clients, and
        `when` to requests whose fields are as given: `client_id`, `version`, `acks` (-1 or "all"), `group`,
        `transactional_id`, `producer_id`, `isolation_level` (0, 1, or their names), `topic` and `partition`
        (the same as the `topic` and `partition` arguments here; for latency and drop-response faults, requests
        with entries for them); e.g.
        `when={"client_id": "billing", "acks": "all"}`. With a topic, a request counts as matching (for `skip`,
        `count` and `hits`) when it has entries of that topic (partition).
        """
        answer = self._control.call("fault.add", kind="error", api=api, error=error, count=count, topic=topic,
                                    partition=partition, source=source, when=when, skip=skip)
        return Fault(self, answer["fault"])

    def add_latency(self, delay_ms: int, api: str | int | None = None, count: int | None = None, *,
                    source: str | None = None, when: dict[str, Any] | None = None, skip: int = 0) -> Fault:
        """Hold back responses (of `api`, or all) by `delay_ms`, for `count` responses or until cleared.

        `source` ("replica" or "client") limits it to requests from follower brokers or from clients, `when` to
        requests whose fields are as given, `skip` lets that many through first (as `fail_requests`).
        """
        answer = self._control.call("fault.add", kind="latency", delay_ms=delay_ms, api=api, count=count,
                                    source=source, when=when, skip=skip)
        return Fault(self, answer["fault"])

    def drop_responses(self, api: str | int, count: int | None = 1, *, source: str | None = None,
                       when: dict[str, Any] | None = None, skip: int = 0) -> Fault:
        """Carry out the next `count` requests of `api` (None: all until cleared), then close the connection
        instead of answering: the client does not learn that its request was done, as when a response is lost, and
        a retry without idempotence does it twice. (A Produce with acks=0, which has no response, is left alone.)
        `source`, `when` and `skip` select requests as for `fail_requests`."""
        answer = self._control.call("fault.add", kind="drop-response", api=api, count=count, source=source,
                                    when=when, skip=skip)
        return Fault(self, answer["fault"])

    def delay_connection(self, delay_ms: int, api: str | int | None = None, count: int | None = None, *,
                         source: str | None = None, when: dict[str, Any] | None = None, skip: int = 0) -> Fault:
        """Hold back the responses of ONE connection by `delay_ms`: the first connection whose request matches
        (`api`, `source`, `when` as for `add_latency`, e.g. `when={"client_id": "billing"}`) and only it; other
        connections, the same client's included, are answered at once. `hits` counts the responses held back."""
        return self._network("connection-delay", api, count, source, when, skip, delay_ms=delay_ms)

    def reorder_responses(self, api: str | int | None = None, count: int | None = None, *,
                          source: str | None = None, when: dict[str, Any] | None = None, skip: int = 0) -> Fault:
        """On ONE connection (the first whose request matches), answer a pipelined request N+1 before request N:
        the response to a matching request is written after the response to the request sent behind it, when the
        client has already sent that one. Kafka's protocol answers in order; `hits` counts the pairs swapped."""
        return self._network("reorder", api, count, source, when, skip)

    def throttle_bandwidth(self, bytes_per_s: int, api: str | int | None = None, count: int | None = None, *,
                           source: str | None = None, when: dict[str, Any] | None = None, skip: int = 0) -> Fault:
        """Write the responses to matching requests at `bytes_per_s` (a slow link to that client: its requests are
        carried out at once, their responses trickle out). `hits` counts the responses paced."""
        return self._network("bandwidth", api, count, source, when, skip, bytes_per_s=bytes_per_s)

    def close_after_bytes(self, n: int, count: int | None = 1, *, api: str | int | None = None,
                          source: str | None = None, when: dict[str, Any] | None = None, skip: int = 0) -> Fault:
        """Close a connection once `n` bytes of responses to matching requests have been written to it, the
        response under way cut off where the n-th byte ends; `count` connections (None: every one until cleared).
        `hits` counts the connections closed."""
        return self._network("close-after-bytes", api, count, source, when, skip, close_after_bytes=n)

    def partial_fetch(self, count: int | None = 1, *, source: str | None = None,
                      when: dict[str, Any] | None = None, skip: int = 0) -> Fault:
        """Answer the next `count` Fetch requests with the last record batch of each partition cut to half its
        bytes, as a broker does at a size limit (max.partition.fetch.bytes, fetch.max.bytes): clients drop the
        partial batch and fetch it again from its offset. A partition's first batch is always sent whole, as
        Kafka's are (KIP-74), so only responses with two batches or more of a partition are cut; `hits` counts
        the responses whose records were cut."""
        return self._network("partial-fetch", "Fetch", count, source, when, skip)

    def _network(self, kind: str, api: str | int | None, count: int | None, source: str | None,
                 when: dict[str, Any] | None, skip: int, **parameter: int) -> Fault:
        answer = self._control.call("fault.add", kind=kind, api=api, count=count, source=source, when=when,
                                    skip=skip, **parameter)
        return Fault(self, answer["fault"])

    def fill_disk(self, quota_bytes: int | None = None) -> Fault:
        """Cap the broker's data dir at `quota_bytes` (default: what it holds now, i.e. full).

        Appends that would exceed it fail with KAFKA_STORAGE_ERROR; nothing stored is touched.
        """
        answer = self._control.call("fault.add", kind="disk", quota_bytes=quota_bytes)
        return Fault(self, answer["fault"])

    def cut_link(self, to: int, both_ways: bool = True) -> Fault:
        """Cut the link between this node and node `to` (a broker or the controller): a network partition.

        Requests this node would send `to` (replica fetches, heartbeats and other requests to the controller) fail
        as if it were unreachable, and the inter-broker and control-plane requests `to` sends here are refused
        unanswered; client connections are untouched. Both ways (the default) node `to` cuts its link here as
        well; clearing the fault heals both ends.
        """
        answer = self._control.call("fault.add", kind="link", to=to, both_ways=both_ways)
        return Fault(self, answer["fault"])

    def pause_fetching(self, topic: str | None = None, partition: int | None = None) -> Fault:
        """Stop this broker's replica fetchers (for every partition it follows, also later ones; for the
        partitions of `topic` it has a replica of now; or for one partition): it stays up and answers clients,
        while its leaders see it stop fetching and take it out of their ISRs after replica.lag.time.max.ms.
        Clearing the fault resumes fetching, and it catches up."""
        answer = self._control.call("fault.add", kind="fetch-pause", topic=topic, partition=partition)
        return Fault(self, answer["fault"])

    def hold_transaction_markers(self, to: int | None = None) -> Fault:
        """Keep this broker, as transaction coordinator, from writing commit and abort markers to broker `to` (None:
        to any): EndTxn is answered, but the markers wait until the fault is cleared, so the partitions' last stable
        offsets stay where the transactions began (read_committed readers wait, read_uncommitted ones do not)."""
        answer = self._control.call("fault.add", kind="txn-markers-hold", to=to)
        return Fault(self, answer["fault"])

    def fail_log_dir(self, path: str | Path) -> Fault:
        """Fail one of the broker's log dirs as an I/O error would: its replicas go offline (KAFKA_STORAGE_ERROR)
        while the other dirs keep serving. Only a restart of the broker brings the dir back."""
        answer = self._control.call("fault.add", kind="log-dir", path=str(path))
        return Fault(self, answer["fault"])

    def fail_authentication(self, user: str | None = None) -> Fault:
        """Refuse the SASL authentications of `user` (None: everyone's) as a wrong password is refused
        (SASL_AUTHENTICATION_FAILED, then the connection closed), until the fault is cleared. Connections already
        authenticated stay; `expire_sessions` makes them authenticate again."""
        answer = self._control.call("fault.add", kind="auth-failure", user=user)
        return Fault(self, answer["fault"])

    def crash_cleaner(self, at: str, topic: str | None = None) -> Fault:
        """Kill the broker (as kill -9) when its log cleaner reaches `at` while swapping a cleaned segment of `topic`
        (None: any) in: "before-swap" (`.cleaned` files written), "mid-swap" (renamed to `.swap`, the old segments
        still there) or "after-swap" (swapped in, the cleaner checkpoint not yet written). The next start recovers
        the log as Kafka's LogLoader does."""
        answer = self._control.call("fault.add", kind="cleaner-crash", at=at, topic=topic)
        return Fault(self, answer["fault"])

    def expire_sessions(self, user: str | None = None) -> int:
        """End the SASL sessions of `user` (None: every user) now, as if connections.max.reauth.ms had passed:
        a connection closes at its next request unless its client re-authenticates first. Returns how many."""
        return self._control.call("sessions.expire", user=user)["expired"]

    def jump_clock(self, ms: int) -> Fault:
        """Step this broker's wall clock by `ms` milliseconds, forwards or back (negative), as a clock step on
        its host would: the timestamps it assigns (LogAppendTime), retention.ms and segment.ms, group and
        transaction timestamps read the stepped clock, while its timers (session timeouts, long polls) go on.
        Applied at once (its `hits` is 1); clearing the fault steps the clock back."""
        answer = self._control.call("fault.add", kind="clock-jump", ms=ms)
        return Fault(self, answer["fault"])

    def close_connections(self) -> int:
        """Close every client connection the broker has open (clients reconnect); returns how many."""
        return self._control.call("connections.close")["closed"]

    def clear(self, kind: str | None = None) -> int:
        """Undo all faults, or those of one kind ("error", "latency", "drop-response", "connection-delay", "reorder",
        "bandwidth", "close-after-bytes", "partial-fetch", "disk", "link", "fetch-pause", "txn-markers-hold",
        "auth-failure", "clock-jump", "cleaner-crash"); returns how many."""
        return self._control.call("fault.clear", kind=kind)["cleared"]

    def list(self) -> list[dict[str, Any]]:
        """The active faults, as the broker describes them."""
        return self._control.call("fault.list")["faults"]
