"""The client commands stopped as a user stops them (Ctrl-C, SIGTERM) and a group member's commit through a
rebalance: a summary, the shell's exit code, a consumer that leaves its group at once, and a transactional producer
that aborts its open transaction."""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

import pytest
from kafka import KafkaProducer

from tests.helpers import wait_until

WAIT_S = 60.0  # a budget for starting commands and reaching a state, not an expectation
# A stopped command leaves its group within 5 s; this bound leaves room for a busy machine, and is well under the
# 45 s session timeout a member that did not leave would keep its partitions for.
STOP_BOUND_S = 20.0
GONE_BOUND_S = 10.0


class Command:
    """A `minikafka` command running for a test, its stdout and stderr read as they come."""

    def __init__(self, bootstrap: str, *args: str, stdin: int | None = subprocess.DEVNULL) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "minikafka", *args, "--bootstrap-server", bootstrap],
                                     stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._out_fd, self._err_fd = self.proc.stdout.fileno(), self.proc.stderr.fileno()
        self.output = {self._out_fd: b"", self._err_fd: b""}
        self._selector = selectors.DefaultSelector()
        for fd in self.output:
            self._selector.register(fd, selectors.EVENT_READ)

    @property
    def stdout(self) -> bytes:
        return self.output[self._out_fd]

    @property
    def stderr(self) -> bytes:
        return self.output[self._err_fd]

    def _read(self, timeout_s: float) -> bool:
        """Read what is there within `timeout_s`; False once both pipes are closed."""
        if not self._selector.get_map():
            return False
        for key, _events in self._selector.select(timeout_s):
            chunk = os.read(key.fd, 65536)
            if chunk:
                self.output[key.fd] += chunk
            else:
                self._selector.unregister(key.fd)
        return True

    def drain(self) -> None:
        """Read all the command has written so far."""
        while self._selector.get_map() and self._selector.select(0):
            self._read(0)

    def wait_for(self, what: str, condition: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
        def reached() -> bool:
            self._read(0.1)
            return condition()

        wait_until(reached, timeout_s, interval=0, message=f"{what}; stderr so far: {self.stderr!r}")

    def finish(self, timeout_s: float) -> int:
        """The exit code, once the command exits and its output is read (AssertionError after `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        while self._read(max(0.0, deadline - time.monotonic())):
            assert time.monotonic() < deadline, f"still running after {timeout_s} s; stderr: {self.stderr!r}"
        return self.proc.wait(max(0.1, deadline - time.monotonic()))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(WAIT_S)
        self._selector.close()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


@contextmanager
def command(bootstrap: str, *args: str, stdin: int | None = subprocess.DEVNULL) -> Iterator[Command]:
    """A command for the block; killed (if still running) and reaped when the block ends."""
    running = Command(bootstrap, *args, stdin=stdin)
    try:
        yield running
    finally:
        running.close()


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    try:
        for i, value in enumerate(values):
            producer.send(topic, value, partition=i % partitions).get(timeout=30)
    finally:
        producer.close()


def test_sigint_while_the_group_rebalances_leaves_the_group_at_once(minikafka_broker):
    broker = minikafka_broker
    topic, group = "stop-rebalancing", "stop-rebalancing-group"
    broker.state.create_topic(topic, partitions=2)
    produce(broker.bootstrap_servers, topic, [b"v%d" % i for i in range(10)], partitions=2)

    def members() -> list[str]:
        return sorted(m.member_id for m in broker.state.group(group).members)

    def stable_with(count: int) -> bool:
        state = broker.state.group(group)
        return state.state == "Stable" and len(state.members) == count and all(m.assignment for m in state.members)

    consume = ("consume", "-t", topic, "-G", group)
    with ExitStack() as stack:
        first = stack.enter_context(command(broker.bootstrap_servers, *consume))
        first.wait_for("the first member to print every record", lambda: first.stdout.count(b"\n") == 10)
        wait_until(lambda: stable_with(1), WAIT_S, message="the first member alone in a stable group")
        (first_id,) = members()
        # A member that will not rejoin: the next rebalance waits for it, as for a consumer stuck in processing.
        frozen = stack.enter_context(command(broker.bootstrap_servers, *consume, "-q"))
        wait_until(lambda: stable_with(2), WAIT_S, message="two members in a stable group")
        frozen.proc.send_signal(signal.SIGSTOP)
        first.drain()
        seen = len(first.stderr)
        joining = stack.enter_context(command(broker.bootstrap_servers, *consume, "-q"))
        wait_until(lambda: len(members()) == 3, WAIT_S, message="a third member to join")
        first.wait_for("the first member to give up its partitions to rejoin",
                       lambda: b"rebalanced: revoked:" in first.stderr[seen:])

        first.proc.send_signal(signal.SIGINT)
        assert first.finish(STOP_BOUND_S) == 130
        assert first.stderr.decode().splitlines()[-1] == f"% Consumed 10 messages from {topic} (stopped by SIGINT)"
        wait_until(lambda: first_id not in members(), GONE_BOUND_S, message="the first member to be gone")

        # The member that was joining waits in its JoinGroup too: it leaves as promptly on SIGTERM.
        joining.proc.send_signal(signal.SIGTERM)
        assert joining.finish(STOP_BOUND_S) == 143
        frozen.proc.send_signal(signal.SIGTERM)
        frozen.proc.send_signal(signal.SIGCONT)
        assert frozen.finish(STOP_BOUND_S) == 143
        wait_until(lambda: members() == [], GONE_BOUND_S, message="the group to have no members")


def test_a_commit_refused_for_a_rebalance_is_made_after_the_rejoin(minikafka_broker):
    broker = minikafka_broker
    topic, group = "commit-rebalancing", "commit-rebalancing-group"
    broker.state.create_topic(topic, partitions=2)
    produce(broker.bootstrap_servers, topic, [b"a", b"b", b"c", b"d"], partitions=2)
    # The coordinator refuses commits as during a rebalance; a member polls, rejoins, and commits then.
    broker.faults.fail_requests("OffsetCommit", "REBALANCE_IN_PROGRESS", count=3, topic=topic)
    with command(broker.bootstrap_servers, "consume", "-t", topic, "-G", group, "-e") as consumer:
        assert consumer.finish(WAIT_S) == 0, consumer.stderr
    assert sorted(consumer.stdout.split()) == [b"a", b"b", b"c", b"d"]
    assert broker.faults.list() == []  # every refusal was answered
    assert broker.state.committed_offsets(group) == {(topic, 0): 2, (topic, 1): 2}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_produce_stopped_says_what_was_delivered_and_exits_as_shells_expect(minikafka_broker, signum):
    broker = minikafka_broker
    topic = f"stop-produce-{signum}"
    broker.state.create_topic(topic, partitions=1)
    with command(broker.bootstrap_servers, "produce", "-t", topic, stdin=subprocess.PIPE) as producer:
        assert producer.proc.stdin is not None
        producer.proc.stdin.write(b"one\ntwo\nthree\n")
        producer.proc.stdin.flush()  # and left open, as a terminal's is
        wait_until(lambda: len(broker.state.records(topic, 0)) == 3, WAIT_S, message="three records in the topic")
        producer.proc.send_signal(signum)
        assert producer.finish(STOP_BOUND_S) == 128 + signum
    summary = f"% Produced 3 messages to {topic}, 0 failed (stopped by {signal.Signals(signum).name})"
    assert producer.stderr.decode().splitlines()[-1] == summary


def test_produce_in_transactions_stopped_aborts_the_open_transaction(minikafka_broker):
    broker = minikafka_broker
    topic = "stop-produce-transactions"
    broker.state.create_topic(topic, partitions=1)
    with command(broker.bootstrap_servers, "produce", "-t", topic, "--transactional-id", "stop-loader",
                 "--transaction-size", "2", stdin=subprocess.PIPE) as producer:
        assert producer.proc.stdin is not None
        # "fou" is a message its writer has not finished: the input is not idle, so "three" waits in an open
        # transaction (and stdin is left open)
        producer.proc.stdin.write(b"one\ntwo\nthree\nfou")
        producer.proc.stdin.flush()
        wait_until(lambda: broker.state.partition(topic, 0).high_watermark == 4, WAIT_S,
                   message="two committed records, their marker, and the open transaction's record")
        assert broker.state.transaction("stop-loader").state == "Ongoing"  # the second one, holding "three"
        producer.proc.send_signal(signal.SIGTERM)
        assert producer.finish(STOP_BOUND_S) == 143
    assert producer.stderr.decode().splitlines()[-1] == (
        f"% Produced 2 messages to {topic} in 1 transaction(s), 1 aborted (stopped by SIGTERM)")
    # EndTxn is answered before the markers are written, as in Kafka; CompleteAbort is logged after them.
    wait_until(lambda: broker.state.transaction("stop-loader").state == "CompleteAbort", WAIT_S,
               message="the coordinator to finish the abort")
    state = broker.state.partition(topic, 0)
    assert state.last_stable_offset == state.high_watermark == 5  # the abort marker, not the transaction timeout
    assert [r.value for r in broker.state.records(topic, isolation_level="read_committed")] == [b"one", b"two"]


def test_consume_stopped_by_sigterm_says_what_it_printed(minikafka_broker):
    broker = minikafka_broker
    topic = "stop-consume"
    broker.state.create_topic(topic, partitions=1)
    produce(broker.bootstrap_servers, topic, [b"x", b"y"], partitions=1)
    with command(broker.bootstrap_servers, "consume", "-t", topic) as consumer:
        consumer.wait_for("both records", lambda: consumer.stdout == b"x\ny\n")
        consumer.proc.send_signal(signal.SIGTERM)
        assert consumer.finish(STOP_BOUND_S) == 143
    assert consumer.stderr.decode().splitlines()[-1] == f"% Consumed 2 messages from {topic} (stopped by SIGTERM)"
