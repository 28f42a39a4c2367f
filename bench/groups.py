"""Consumer groups (issue 21): how long a member's partitions go unconsumed after it leaves, with the classic
protocol (JoinGroup/SyncGroup, librdkafka's default eager assignors: every member gives up everything and the group
waits for all to join again) and with KIP-848's consumer protocol (the broker assigns; only the partitions that move
stop), for 3 and 30 members sharing 60 partitions.

A producer writes every partition steadily (--rate records/s over all of them). One member is its own process; the
others are consumers on threads of this one. That member leaves, closing (LeaveGroup / a leaving heartbeat) or killed
-9 (the coordinator learns it from the session timeout: session.timeout.ms for classic, the broker's
group.consumer.session.timeout.ms for the consumer protocol, both --session-ms). Printed per case:
- takeover: from the leave (or kill) to the last of the leaver's partitions being consumed by another member;
- pause of the others: the longest a partition of the other members went without being consumed, from the leave
  until the takeover is complete, for those that kept their member and those that moved (the producer's interval
  per partition and the consumers' fetch wait are the floor).
Targets: the consumer protocol at least 5x faster than classic to take over, and no pause of unaffected partitions.

Run: python bench/groups.py [--members 3 30] [--partitions 60] [--rate 600] [--session-ms 6000] [--heartbeat-ms 1000]
     [--processing-ms 0]
     [--protocols classic consumer] [--how close kill]
One broker (`minikafka.Broker`, a free loopback port, a temporary data dir); confluent-kafka (librdkafka) consumers.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer

import minikafka

WAIT_S = 120.0  # a budget for a group to settle or a takeover, not an expectation


def consumer_config(bootstrap: str, group: str, protocol: str, session_ms: int, heartbeat_ms: int
                    ) -> dict[str, object]:
    config: dict[str, object] = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                                 "auto.offset.reset": "latest", "enable.auto.commit": True,
                                 "auto.commit.interval.ms": 500, "fetch.wait.max.ms": 50}
    if protocol == "classic":
        config |= {"session.timeout.ms": session_ms, "heartbeat.interval.ms": heartbeat_ms}
    return config


@dataclass
class Consumption:
    """When each partition was last consumed, and by whom; filled by every member thread."""

    last: dict[int, tuple[str, float]] = field(default_factory=dict)
    # after `mark()`: each partition's first consumption by a member other than the one that had it at the mark,
    # and the longest it went without being consumed
    first_elsewhere: dict[int, float] = field(default_factory=dict)
    longest_gap: dict[int, float] = field(default_factory=dict)
    marked_at: float | None = None
    owners_at_mark: dict[int, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def consumed(self, member: str, partition: int, at: float) -> None:
        with self.lock:
            previous = self.last.get(partition)
            self.last[partition] = (member, at)
            if self.marked_at is None:
                return
            if previous is not None:
                gap = at - max(previous[1], self.marked_at)
                self.longest_gap[partition] = max(gap, self.longest_gap.get(partition, 0.0))
            if self.owners_at_mark.get(partition) != member and partition not in self.first_elsewhere:
                self.first_elsewhere[partition] = at

    def mark(self, recent_s: float = 1.0) -> float:
        """From now on, note who takes over; the members own now the partitions they consumed in the last
        `recent_s`."""
        with self.lock:
            self.marked_at = time.monotonic()
            self.owners_at_mark = {p: member for p, (member, at) in self.last.items()
                                   if self.marked_at - at < recent_s}
            self.first_elsewhere, self.longest_gap = {}, {}
            return self.marked_at


def member_thread(name: str, config: dict[str, object], topic: str, consumption: Consumption,
                  stop: threading.Event, processing_s: float) -> None:
    consumer = Consumer({**config, "client.id": name})
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            messages = consumer.consume(num_messages=500, timeout=0.05)
            for message in messages:
                if message.error() is None:
                    consumption.consumed(name, message.partition(), time.monotonic())
            if messages:
                stop.wait(processing_s)  # the application's work on what it consumed
    finally:
        consumer.close()


def leaver_process(bootstrap: str, topic: str, group: str, protocol: str, session_ms: int, heartbeat_ms: int
                   ) -> None:
    """The member that leaves: consumes until SIGTERM (then closes) or SIGKILL; prints its partitions as they
    change, and `consumed P` once for each partition it has consumed from."""
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    consumer = Consumer({**consumer_config(bootstrap, group, protocol, session_ms, heartbeat_ms),
                         "client.id": "leaver"})
    seen: set[int] = set()
    consumer.subscribe([topic])
    while not stopping.is_set():
        for message in consumer.consume(num_messages=500, timeout=0.05):
            if message.error() is None and message.partition() not in seen:
                seen.add(message.partition())
                print("consumed", message.partition(), flush=True)
    consumer.close()


def producer_thread(bootstrap: str, topic: str, partitions: int, rate: float, stop: threading.Event) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent = 0
    started = time.monotonic()
    while not stop.is_set():
        producer.produce(topic, b"x", partition=sent % partitions)
        sent += 1
        producer.poll(0)
        time.sleep(max(0.0, started + sent / rate - time.monotonic()))
    producer.flush(10)


def wait_for(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"not within {WAIT_S:.0f} s: {what}")
        time.sleep(0.05)


@dataclass
class Case:
    protocol: str
    members: int
    how: str
    takeover_s: float
    leaver_partitions: int
    stayed: int  # the others' partitions that kept their member
    stayed_pause_s: float  # the longest one of those went unconsumed
    moved: int  # the others' partitions that changed member
    moved_pause_s: float


def run_case(broker: minikafka.Broker, protocol: str, members: int, how: str, args: argparse.Namespace) -> Case:
    bootstrap = broker.bootstrap_servers
    topic = f"groups-{protocol}-{members}-{how}"
    broker.state.create_topic(topic, partitions=args.partitions, replication_factor=1)
    group = f"bench-{topic}"
    stop = threading.Event()
    consumption = Consumption()
    config = consumer_config(bootstrap, group, protocol, args.session_ms, args.heartbeat_ms)
    threads = [threading.Thread(target=producer_thread, args=(bootstrap, topic, args.partitions, args.rate, stop))]
    threads += [threading.Thread(target=member_thread,
                                 args=(f"m{i}", config, topic, consumption, stop, args.processing_ms / 1000))
                for i in range(members - 1)]
    leaver = subprocess.Popen([sys.executable, __file__, "--leaver", bootstrap, topic, group, protocol,
                               str(args.session_ms), str(args.heartbeat_ms)], stdout=subprocess.PIPE, text=True)
    leaver_seen: set[int] = set()

    def read_leaver() -> None:
        assert leaver.stdout is not None
        for line in leaver.stdout:
            if line.startswith("consumed "):
                leaver_seen.add(int(line.split()[1]))

    reader = threading.Thread(target=read_leaver, daemon=True)
    reader.start()
    for thread in threads:
        thread.start()
    try:
        # Settled: every partition consumed lately, the leaver's among them, and for a while no partition changed
        # hands (a classic group's later joiners rebalance it again and again at first).
        def settled() -> bool:
            now = time.monotonic()
            with consumption.lock:
                others = {p for p, (_m, at) in consumption.last.items() if now - at < 1.0}
            return len(others | leaver_seen) == args.partitions and bool(leaver_seen)

        wait_for(settled, f"{members} members consuming all {args.partitions} partitions")
        time.sleep(args.settle_s)
        wait_for(settled, "the group to settle again")
        marked = consumption.mark()
        leaver_partitions = set(range(args.partitions)) - set(consumption.owners_at_mark)
        if how == "close":
            leaver.send_signal(signal.SIGTERM)
        else:
            leaver.kill()
        wait_for(lambda: leaver_partitions <= set(consumption.first_elsewhere),
                 f"another member consuming the leaver's partitions {sorted(leaver_partitions)}")
        takeover_done = max(consumption.first_elsewhere[p] for p in leaver_partitions)
        with consumption.lock:
            owners = dict(consumption.owners_at_mark)
            stayed = [p for p, owner in owners.items() if consumption.last[p][0] == owner]
            moved = [p for p in owners if p not in stayed]

            def pause(partitions: list[int]) -> float:  # one not consumed since the mark paused until now
                return max([consumption.longest_gap.get(p, takeover_done - marked) for p in partitions] or [0.0])

            return Case(protocol, members, how, takeover_done - marked, len(leaver_partitions), len(stayed),
                        pause(stayed), len(moved), pause(moved))
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
        if leaver.poll() is None:
            leaver.kill()
        leaver.wait(10)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--leaver":
        bootstrap, topic, group, protocol, session_ms, heartbeat_ms = sys.argv[2:8]
        leaver_process(bootstrap, topic, group, protocol, int(session_ms), int(heartbeat_ms))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, nargs="+", default=[3, 30])
    parser.add_argument("--partitions", type=int, default=60)
    parser.add_argument("--rate", type=float, default=600.0, help="records/s the producer writes, all partitions")
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-ms", type=int, default=1000,
                        help="both protocols' heartbeat interval (classic: the client's, consumer: the broker's)")
    parser.add_argument("--processing-ms", type=float, default=0.0,
                        help="the application's time on each batch it consumes, on the members that stay")
    parser.add_argument("--settle-s", type=float, default=2.0, help="how long a settled group runs before the leave")
    parser.add_argument("--protocols", nargs="+", choices=["classic", "consumer"], default=["classic", "consumer"])
    parser.add_argument("--how", nargs="+", choices=["close", "kill"], default=["close", "kill"])
    args = parser.parse_args()
    config = {"group.consumer.session.timeout.ms": args.session_ms,
              "group.consumer.min.session.timeout.ms": min(args.session_ms, 45000),
              "group.consumer.heartbeat.interval.ms": args.heartbeat_ms,
              "group.consumer.min.heartbeat.interval.ms": min(args.heartbeat_ms, 5000),
              "group.min.session.timeout.ms": min(args.session_ms, 6000)}
    print(f"{args.partitions} partitions, a producer writing {args.rate:.0f} records/s over them, session timeout "
          f"{args.session_ms} ms, heartbeats every {args.heartbeat_ms} ms, {args.processing_ms:g} ms of processing "
          f"per batch; cpus: {os.cpu_count()}", flush=True)
    with minikafka.Broker(config=config) as broker:
        results: dict[tuple[int, str], dict[str, Case]] = {}
        for members in args.members:
            for how in args.how:
                for protocol in args.protocols:
                    case = run_case(broker, protocol, members, how, args)
                    results.setdefault((members, how), {})[protocol] = case
                    print(f"{members:>2} members, one {'closing' if how == 'close' else 'killed -9'}, {protocol:>8}: "
                          f"its {case.leaver_partitions} partitions consumed elsewhere after {case.takeover_s:.2f} s; "
                          f"the others' {case.stayed} unmoved partitions paused at most {case.stayed_pause_s:.2f} s, "
                          f"their {case.moved} moved ones {case.moved_pause_s:.2f} s", flush=True)
                cases = results[(members, how)]
                if "classic" in cases and "consumer" in cases:
                    ratio = cases["classic"].takeover_s / cases["consumer"].takeover_s
                    print(f"{members:>2} members, one {'closing' if how == 'close' else 'killed -9'}: the consumer "
                          f"protocol takes over {ratio:.1f}x faster than classic (target >= 5x)", flush=True)


if __name__ == "__main__":
    main()
