"""The fault injector: dispatch middleware every Kafka request passes through (KafkaApis.handle wraps its handler
in `handle`), working on the network-level request, and the active faults.

Faults are added and cleared through the control API. An error rule answers the next N matching requests with an
error code, either for the whole request (the handler does not run, so nothing is appended, committed or created)
or only for the entries of one topic or topic-partition (see `shaping`). A latency rule holds responses back for
a while, released early when cleared or at shutdown. A cut link (see `link_faults`) refuses here the requests of
the node cut off; paused fetching (see `fetch_pauses`) stops this broker's replica fetchers. The disk quota is the
broker's own object; the injector only lists and clears it with the other faults. A drop-response rule lets the
request be carried out, then closes the connection instead of answering. Every fault has an id of one sequence,
so one id names one fault whatever its kind. Every fault counts its hits (what it affected: requests answered,
held back or left unanswered, responses delayed, swapped, paced or cut, connections closed, appends refused,
requests across a cut link, partition fetches held back, transaction markers held, authentications refused); a
fault used up or cleared is kept, inactive, as last described, among the last SPENT_KEPT, so a test can still read
how often it fired.
"""
from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from minikafka.broker.faults.authentication_failures import KIND as AUTHENTICATION_FAILURE_KIND
from minikafka.broker.faults.authentication_failures import AuthenticationFailure, AuthenticationFailures
from minikafka.broker.faults.cleaner_crashes import KIND as CLEANER_CRASH_KIND
from minikafka.broker.faults.cleaner_crashes import CleanerCrash, CleanerCrashes
from minikafka.broker.faults.clock_jumps import KIND as CLOCK_JUMP_KIND
from minikafka.broker.faults.clock_jumps import ClockJump, ClockJumps
from minikafka.broker.faults.disk_quota import DiskQuota
from minikafka.broker.faults.fetch_pauses import FetchPause, FetchPauses, Scope
from minikafka.broker.faults.link_faults import CutLink, LinkFaults, PeerSecurity
from minikafka.broker.faults.marker_holds import KIND as MARKER_HOLD_KIND
from minikafka.broker.faults.marker_holds import MarkerHold, MarkerHolds
from minikafka.broker.faults.network_rules import (
    BANDWIDTH,
    CLOSE_AFTER_BYTES,
    CONNECTION_DELAY,
    PARTIAL_FETCH,
    REORDER,
    NetworkRule,
    cut_last_batch,
)
from minikafka.broker.faults.network_rules import KINDS as NETWORK_KINDS
from minikafka.broker.faults.rules import (
    DropRule,
    ErrorRule,
    FaultError,
    LatencyRule,
    api_key_of,
    error_code_of,
    request_facts,
    request_source,
    skip_of,
    source_of,
    when_of,
)
from minikafka.broker.faults.shaping import (
    PARTITION,
    TOPIC,
    Answering,
    Shape,
    build_error_response,
    entry_kinds,
    has_top_error,
    overwrite_topic_errors,
    prune,
    request_entries,
    shape_for,
    splice,
    target_depth,
)
from minikafka.broker.network.request_channel import Request
from minikafka.broker.network.response_faults import ByteBudget, ResponseFaults
from minikafka.broker.network.socket_server import CloseConnection
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import Records
from minikafka.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from minikafka.broker.metadata.metadata_cache import MetadataCache
    from minikafka.broker.replication.purgatory import Purgatory
    from minikafka.broker.replication.replica_fetcher_manager import ReplicaFetcherManager

log = logging.getLogger("minikafka.faults")

# The purgatory key that held-back responses wait on; checking it releases them.
LATENCY_KEY = ("minikafka", "latency")
SPENT_KEPT = 1000
DROP_KIND = "drop-response"
KINDS = ("error", "latency", DROP_KIND, *NETWORK_KINDS, "disk", "link", "fetch-pause", MARKER_HOLD_KIND,
         AUTHENTICATION_FAILURE_KIND, CLOCK_JUMP_KIND,
         CLEANER_CRASH_KIND)

Rule = ErrorRule | LatencyRule | DropRule | NetworkRule
# Answers a request with its response message (not yet encoded), or None (acks=0 produce).
Handler = Callable[[Request], Awaitable[Any]]


class FaultInjector:
    def __init__(self, purgatory: Purgatory, disk_quota: DiskQuota, topics: Callable[[], MetadataCache],
                 peer_security: PeerSecurity = lambda node_id: None) -> None:
        self._purgatory = purgatory
        self.disk_quota = disk_quota
        self._topics = topics  # the broker's topics, which a request may name by id
        self._ids = itertools.count(1)
        self.error_rules: list[ErrorRule] = []
        self.latency_rules: list[LatencyRule] = []
        self.drop_rules: list[DropRule] = []
        self.network_rules: list[NetworkRule] = []
        self._spent: dict[int, dict[str, Any]] = {}  # faults used up or cleared, as last described, oldest first
        self.links = LinkFaults(peer_security)
        self.fetch_pauses = FetchPauses()
        self.marker_holds = MarkerHolds()
        self.authentication_failures = AuthenticationFailures()
        self.cleaner_crashes = CleanerCrashes()
        self.clock_jumps = ClockJumps()

    # ---- adding and clearing ------------------------------------------------------------------------------------

    def add_error(self, api: int | str, error: int | str, count: int | None = 1, topic: str | None = None,
                  partition: int | None = None, source: str | None = None,
                  when: dict[str, Any] | None = None, skip: int | None = None) -> ErrorRule:
        api_key = api_key_of(api)
        code = error_code_of(error)
        if code == ErrorCode.NONE:
            raise FaultError("error code NONE is not an error")
        _check_count(count)
        checked_when = when_of(when)
        if "topic" in checked_when:  # answered per topic-partition, as the rule's own topic and partition are
            if topic is not None:
                raise FaultError("give the topic once: as topic, or in when")
            topic, partition = checked_when["topic"], checked_when.get("partition")
            if "min_offset" not in checked_when and "max_offset" not in checked_when:
                del checked_when["topic"]  # else kept: the offset must be one of that topic-partition's entries
                checked_when.pop("partition", None)
        if partition is not None and topic is None:
            raise FaultError("a partition needs its topic")
        kinds = entry_kinds(api_key)
        if topic is not None and TOPIC not in kinds:
            raise FaultError(f"{api_key.api_name} requests do not name topics; inject the error for the whole "
                             "request instead")
        if partition is not None and PARTITION not in kinds:
            raise FaultError(f"{api_key.api_name} errors are per topic, not per partition")
        if topic is None and not kinds and not has_top_error(api_key):
            raise FaultError(f"{api_key.api_name} responses carry no error code to inject")
        selected = source_of(source, api_key)
        rule = ErrorRule(next(self._ids), api_key, code, count, topic, partition, selected, checked_when,
                         skip=skip_of(skip))
        self.error_rules.append(rule)
        log.warning("fault added: %s", rule.describe())
        return rule

    def add_latency(self, delay_ms: int, api: int | str | None = None, count: int | None = None,
                    source: str | None = None, when: dict[str, Any] | None = None,
                    skip: int | None = None) -> LatencyRule:
        if delay_ms < 0:
            raise FaultError(f"latency must not be negative, got {delay_ms} ms")
        _check_count(count)
        api_key = None if api is None else api_key_of(api)
        selected = source_of(source, api_key)
        rule = LatencyRule(next(self._ids), int(delay_ms), api_key, count, selected, when_of(when), skip=skip_of(skip))
        self.latency_rules.append(rule)
        log.warning("fault added: %s", rule.describe())
        return rule

    def add_drop_response(self, api: int | str, count: int | None = 1, source: str | None = None,
                          when: dict[str, Any] | None = None, skip: int | None = None) -> DropRule:
        _check_count(count)
        api_key = api_key_of(api)
        rule = DropRule(next(self._ids), api_key, count, source_of(source, api_key), when_of(when),
                        skip=skip_of(skip))
        self.drop_rules.append(rule)
        log.warning("fault added: %s", rule.describe())
        return rule

    def add_network_rule(self, kind: str, api: int | str | None = None, count: int | None = None,
                         source: str | None = None, when: dict[str, Any] | None = None, skip: int | None = None,
                         delay_ms: int | None = None, bytes_per_s: int | None = None,
                         close_after_bytes: int | None = None) -> NetworkRule:
        """A rule of a network kind (network_rules.KINDS), with the parameter that kind takes."""
        _check_count(count)
        needed = {CONNECTION_DELAY: ("delay_ms", delay_ms, 0), BANDWIDTH: ("bytes_per_s", bytes_per_s, 1),
                  CLOSE_AFTER_BYTES: ("close_after_bytes", close_after_bytes, 1)}.get(kind)
        if needed is not None:
            name, value, least = needed
            if value is None or int(value) < least:
                raise FaultError(f"a {kind} fault needs {name} of at least {least}, got {value}")
        api_key = None if api is None else api_key_of(api)
        if kind == PARTIAL_FETCH:
            if api_key not in (None, ApiKey.FETCH):
                raise FaultError("a partial-fetch fault answers Fetch requests only")
            api_key = ApiKey.FETCH
        rule = NetworkRule(next(self._ids), kind, count, api_key, source_of(source, api_key), when_of(when),
                           None if delay_ms is None else int(delay_ms),
                           None if bytes_per_s is None else int(bytes_per_s),
                           None if close_after_bytes is None else int(close_after_bytes), skip=skip_of(skip))
        self.network_rules.append(rule)
        log.warning("fault added: %s", rule.describe())
        return rule

    def fill_disk(self, quota_bytes: int | None) -> dict[str, Any]:
        """Cap the broker's log dirs at `quota_bytes` (None: what they hold now); the disk fault, with its id."""
        return self.disk_quota.set(quota_bytes, next(self._ids))

    async def cut_link(self, own_id: int, to: int, peer: tuple[str, int], both_ways: bool) -> CutLink:
        """Cut this node's link to node `to` (whose control API is at `peer`), and its link here too if both ways."""
        return await self.links.cut(next(self._ids), own_id, to, peer, both_ways)

    def pause_fetching(self, manager: ReplicaFetcherManager, topic: str | None, partition: int | None,
                       partitions: Scope) -> FetchPause:
        """Stop the replica fetchers from fetching `partitions` (None: every partition)."""
        return self.fetch_pauses.pause(next(self._ids), manager, topic, partition, partitions)

    def hold_transaction_markers(self, to: int | None) -> MarkerHold:
        """Keep this broker's transaction coordinator from sending WriteTxnMarkers to broker `to` (None: any)."""
        return self.marker_holds.hold(next(self._ids), to)

    def fail_authentication(self, user: str | None) -> AuthenticationFailure:
        """Refuse the SASL authentications of `user` (None: everyone's) as a wrong password is refused."""
        return self.authentication_failures.add(next(self._ids), user)

    def crash_cleaner(self, at: str, topic: str | None) -> CleanerCrash:
        """Kill the broker when its log cleaner reaches `at` (see cleaner_crashes) on a log of `topic` (None: any)."""
        try:
            return self.cleaner_crashes.arm(next(self._ids), at, topic)
        except ValueError as exc:
            raise FaultError(str(exc)) from None
    def jump_clock(self, ms: int) -> ClockJump:
        """Step this broker's wall clock by `ms` (negative: back), its timers untouched (see clock_jumps)."""
        return self.clock_jumps.jump(next(self._ids), ms)

    async def clear(self, kind: str | None = None, rule_id: int | None = None) -> int:
        """Remove faults (all, those of one of KINDS, or one by id); returns how many."""
        if kind is not None and kind not in KINDS:
            raise FaultError(f"unknown fault kind {kind!r}: expected {', '.join(KINDS)}")
        cleared = 0
        others = {fault["id"]: fault for fault in self._other_faults() if fault.get("id") is not None}
        if kind in (None, "error"):
            kept = [r for r in self.error_rules if rule_id is not None and r.id != rule_id]
            cleared += len(self.error_rules) - len(kept)
            self._retire(r for r in self.error_rules if r not in kept)
            self.error_rules = kept
        if kind in (None, "latency"):
            kept_latency = [r for r in self.latency_rules if rule_id is not None and r.id != rule_id]
            cleared += len(self.latency_rules) - len(kept_latency)
            self._retire(r for r in self.latency_rules if r not in kept_latency)
            self.latency_rules = kept_latency
            self._purgatory.check_and_complete(LATENCY_KEY)
        if kind in (None, DROP_KIND):
            kept_drops = [r for r in self.drop_rules if rule_id is not None and r.id != rule_id]
            cleared += len(self.drop_rules) - len(kept_drops)
            self._retire(r for r in self.drop_rules if r not in kept_drops)
            self.drop_rules = kept_drops
        if kind is None or kind in NETWORK_KINDS:
            kept_network = [r for r in self.network_rules
                            if (rule_id is not None and r.id != rule_id) or kind not in (None, r.kind)]
            cleared += len(self.network_rules) - len(kept_network)
            self._retire(r for r in self.network_rules if r not in kept_network)
            self.network_rules = kept_network
            self._purgatory.check_and_complete(LATENCY_KEY)
        if kind in (None, "disk") and rule_id is None and self.disk_quota.clear():
            cleared += 1
        if kind in (None, "fetch-pause"):
            cleared += self.fetch_pauses.resume(rule_id)
        if kind in (None, MARKER_HOLD_KIND):
            cleared += self.marker_holds.release(rule_id)
        if kind in (None, AUTHENTICATION_FAILURE_KIND):
            cleared += self.authentication_failures.clear(rule_id)
        if kind in (None, CLEANER_CRASH_KIND):
            cleared += self.cleaner_crashes.disarm(rule_id)
        if kind in (None, CLOCK_JUMP_KIND):
            cleared += self.clock_jumps.undo(rule_id)
        if kind in (None, "link"):
            cleared += await self.links.heal(rule_id)
        if cleared:
            log.warning("faults cleared: %d (%s)", cleared, kind or "all")
            remaining = {fault.get("id") for fault in self._other_faults()}
            self._keep_spent(fault for fault_id, fault in others.items() if fault_id not in remaining)
        return cleared

    def _other_faults(self) -> list[dict[str, Any]]:
        """The faults that are not rules, as they describe themselves now."""
        faults = self.links.describe() + self.fetch_pauses.describe() + self.marker_holds.describe()
        faults += self.authentication_failures.describe() + self.clock_jumps.describe()
        faults += self.cleaner_crashes.describe()
        disk = self.disk_quota.describe()
        return faults if disk is None else faults + [disk]

    def _retire(self, rules: Iterable[Rule]) -> None:
        self._keep_spent(rule.describe() for rule in rules)

    def _keep_spent(self, faults: Iterable[dict[str, Any]]) -> None:
        for fault in faults:
            self._spent[fault["id"]] = fault
        while len(self._spent) > SPENT_KEPT:
            del self._spent[next(iter(self._spent))]

    def get(self, rule_id: int) -> dict[str, Any]:
        """One fault by id, active or used up or cleared, with "active" saying which."""
        for fault in self.describe():
            if fault.get("id") == rule_id:
                return {**fault, "active": True}
        spent = self._spent.get(rule_id)
        if spent is None:
            raise FaultError(f"no fault {rule_id}")
        return {**spent, "active": False}

    def describe(self) -> list[dict[str, Any]]:
        rules: list[Rule] = [*self.error_rules, *self.latency_rules, *self.drop_rules, *self.network_rules]
        return [r.describe() for r in rules] + self._other_faults()

    # ---- the request hook ---------------------------------------------------------------------------------------

    async def handle(self, request: Request, handler: Handler) -> Any:
        """Answer one request, applying whatever faults match it; with none, this is just `handler`."""
        self._refuse_if_cut_off(request)
        if not (self.error_rules or self.latency_rules or self.drop_rules or self.network_rules):
            response = await handler(request)
        else:
            header = request.header
            facts = request_facts(header.client_id, header.api_version, request.body,
                                  request_source(header.api_key, request.body))
            facts["entries"] = self._entries(request)
            cut = self._take_partial_fetch(request, facts)
            response = await self._respond(request, handler, facts)
            if cut is not None and cut():
                self._hit(self.network_rules, cut.rule)
            if response is not None and self._take_drop(header.api_key, facts):
                raise CloseConnection(f"dropped the {ApiKey(request.header.api_key).api_name} response to "
                                      f"{request.context.peer} after carrying out the request")
            delay_ms = self._take_latency(header.api_key, facts)
            if response is not None:
                delay_ms += self._shape_response(request, facts)
            if delay_ms:
                await self._purgatory.wait_any([LATENCY_KEY], delay_ms / 1000)
        self._refuse_if_cut_off(request)  # cut while the request waited: its response is lost with the link
        return response

    def _entries(self, request: Request) -> list[tuple[str | None, int | None, int | None]]:
        """The (topic, partition, offset) entries `when` topic, partition and offsets select on."""
        return request_entries(request, self._topics())

    def _refuse_if_cut_off(self, request: Request) -> None:
        refusal = self.links.refusal(request.header.api_key, request.body)
        if refusal is not None:
            log.debug("%s (connection from %s closed)", refusal, request.context.peer)
            raise CloseConnection(refusal)

    async def _respond(self, request: Request, handler: Handler, facts: dict[str, Any]) -> Any:
        api_key, version, peer = request.header.api_key, request.header.api_version, request.context.peer
        body: Any = request.body
        assert request.schema is not None  # faults apply to the Kafka APIs, which are decoded
        answering = Answering(version, request.schema.response[version], self._topics())
        shape = shape_for(api_key, version)
        for rule in list(self.error_rules):
            if not rule.matches(api_key, facts):
                continue
            code = rule.error_code
            if rule.topic is None:
                if rule.take_skip():
                    continue
                self._spend(rule)
                log.info("injecting %s into %s from %s", code.name, rule.api_key.api_name, peer)
                if api_key == ApiKey.PRODUCE and body.acks == 0:
                    raise CloseConnection(f"injected {code.name} into an acks=0 produce")
                return build_error_response(answering, body, shape, code)
            if shape is None:
                continue
            target = target_depth(shape, TOPIC if rule.partition is None else PARTITION)
            selects = functools.partial(_rule_matches, rule)
            if rule.skipped < rule.skip and prune(answering, body, shape, target, selects, remove=False):
                rule.take_skip()
                continue
            pruned = prune(answering, body, shape, target, selects)
            if pruned:
                self._spend(rule)
                log.info("injecting %s into %s for %s from %s", code.name, rule.api_key.api_name,
                         _describe_target(rule), peer)
                return await self._finish(answering, request, handler, shape, [(path, code) for path in pruned])
            if api_key == ApiKey.METADATA and body.topics is None:
                response = await handler(request)
                if any(t.name == rule.topic for t in response.topics) and not rule.take_skip() \
                        and overwrite_topic_errors(response, rule.topic, code):
                    self._spend(rule)
                return response
        return await handler(request)

    async def _finish(self, answering: Answering, request: Request, handler: Handler, shape: Shape,
                      errors: list[tuple[list[Any], ErrorCode]]) -> Any:
        body: Any = request.body
        if hasattr(body, "max_wait_ms"):
            body.max_wait_ms = 0  # as in Kafka, a fetch with a partition in error is answered at once
        response = await handler(request)
        if response is None:
            # An acks=0 produce: Kafka closes the connection when any partition fails.
            raise CloseConnection("injected error into an acks=0 produce")
        for path, code in errors:
            splice(answering, response, shape, path, code)
        return response

    def _spend(self, rule: ErrorRule) -> None:
        self._hit(self.error_rules, rule)

    def _hit(self, rules: list[Any], rule: Rule) -> None:
        """A rule applied once more: count it, and retire it once its count is used up."""
        rule.hits += 1
        if rule.remaining is not None:
            rule.remaining -= 1
            if rule.remaining <= 0:
                rules.remove(rule)
                self._retire([rule])

    def _take_drop(self, api_key: int, facts: dict[str, Any]) -> bool:
        rule = next((r for r in self.drop_rules if r.matches(api_key, facts)), None)
        if rule is None or rule.take_skip():
            return False
        self._hit(self.drop_rules, rule)
        return True

    def _matching(self, kind: str, api_key: int, facts: dict[str, Any], connection_id: int) -> NetworkRule | None:
        rule = next((r for r in self.network_rules if r.kind == kind and r.matches(api_key, facts, connection_id)),
                    None)
        return None if rule is None or rule.take_skip() else rule

    def _take_partial_fetch(self, request: Request, facts: dict[str, Any]) -> _RecordsCut | None:
        """A partial-fetch rule for this Fetch: its records cut as the response is built (ResponseFaults)."""
        if request.header.api_key != ApiKey.FETCH:
            return None
        rule = self._matching(PARTIAL_FETCH, request.header.api_key, facts, request.context.connection_id)
        if rule is None:
            return None
        cut = _RecordsCut(rule)
        request.context.response_faults = ResponseFaults(cut_records=cut.records)
        return cut

    def _shape_response(self, request: Request, facts: dict[str, Any]) -> int:
        """Leave the network rules matching this request on its connection for the socket server (reorder,
        bandwidth, byte budget); the connection delay to hold the response back by, in ms."""
        api_key, conn = request.header.api_key, request.context
        faults = conn.response_faults or ResponseFaults()
        delay_ms = 0
        delayed = self._matching(CONNECTION_DELAY, api_key, facts, conn.connection_id)
        if delayed is not None and delayed.delay_ms is not None:
            delayed.take_connection(conn.connection_id, conn.peer)
            self._hit(self.network_rules, delayed)
            delay_ms = delayed.delay_ms
        reordered = self._matching(REORDER, api_key, facts, conn.connection_id)
        if reordered is not None:
            reordered.take_connection(conn.connection_id, conn.peer)
            faults.on_reordered = functools.partial(self._reordered, reordered)
        paced = self._matching(BANDWIDTH, api_key, facts, conn.connection_id)
        if paced is not None:
            faults.bytes_per_s = paced.bytes_per_s
            self._hit(self.network_rules, paced)
        closing = self._matching(CLOSE_AFTER_BYTES, api_key, facts, conn.connection_id)
        if closing is not None and closing.close_after_bytes is not None:
            budget = conn.byte_budgets.get(closing.id)
            if budget is None:
                budget = conn.byte_budgets[closing.id] = ByteBudget(closing.close_after_bytes,
                                                                    functools.partial(self._closed, closing))
            faults.budget = budget
        if faults.on_reordered is not None or faults.shapes_writes:
            conn.response_faults = faults
        return delay_ms

    def _reordered(self, rule: NetworkRule) -> None:
        if rule in self.network_rules:
            self._hit(self.network_rules, rule)

    def _closed(self, rule: NetworkRule) -> None:
        if rule in self.network_rules:
            self._hit(self.network_rules, rule)

    def _take_latency(self, api_key: int, facts: dict[str, Any]) -> int:
        rule = next((r for r in self.latency_rules if r.matches(api_key, facts)), None)
        if rule is None or rule.take_skip():
            return 0
        self._hit(self.latency_rules, rule)
        return rule.delay_ms


class _RecordsCut:
    """A partial-fetch rule's cut of one Fetch response's records; called after, whether it cut any."""

    def __init__(self, rule: NetworkRule) -> None:
        self.rule = rule
        self.cut = 0

    def records(self, records: Records) -> Records:
        shorter = cut_last_batch(records)
        if shorter is None:
            return records
        self.cut += 1
        return shorter

    def __call__(self) -> bool:
        return self.cut > 0


def _check_count(count: int | None) -> None:
    if count is not None and count < 1:
        raise FaultError(f"count must be at least 1 (or none for every request), got {count}")


def _describe_target(rule: ErrorRule) -> str:
    return str(rule.topic) if rule.partition is None else f"{rule.topic}-{rule.partition}"


def _rule_matches(rule: ErrorRule, keys: list[tuple[str, Any]]) -> bool:
    for kind, key in keys:
        if kind == TOPIC and key != rule.topic:
            return False
        if kind == PARTITION and rule.partition is not None and key != rule.partition:
            return False
    return True
