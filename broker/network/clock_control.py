"""The control API's clock operations, served alike by a broker's listener and a controller's:
- clock.now: the node's clock: "now_ms" (its wall clock), "advanced_ms" (how far it was advanced in all), "manual";
- clock.advance: move a manual clock forwards by "ms" (see minikafka.broker.clock), then answer once every task
  the advance made due has run and the node is idle again (its tasks all waiting), so that the test reads what
  the timers did. A node on the system's clock refuses it.
"""
from __future__ import annotations

from typing import Any

import trio
import trio.testing

from minikafka.broker.clock.broker_clock import BrokerClock, broker_clock
from minikafka.broker.network.control_api import ControlRefused
from minikafka.broker.network.socket_server import ConnectionInfo

# How long the node gets to go idle after an advance: a budget (a node that never idles, e.g. under a client's
# steady load, answers after it), not an expectation.
SETTLE_TIMEOUT_S = 5.0
# How long the node must stay idle to count as settled: long enough for a request to itself over loopback (a
# coordinator's markers, a follower's fetch) to arrive.
SETTLE_CUSHION_S = 0.02


def describe_clock(clock: BrokerClock) -> dict[str, Any]:
    return {"now_ms": clock.wall_clock_ms(), "advanced_ms": round(clock.advanced_s * 1000), "manual": clock.manual}


async def clock_now(_node: object, _request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    return describe_clock(broker_clock())


async def clock_advance(_node: object, request: dict[str, Any], _conn: ConnectionInfo) -> dict[str, Any]:
    clock = broker_clock()
    if not clock.manual:
        raise ControlRefused("this node runs on the system's clock, which only time moves: start it with a manual "
                             "clock (minikafka.Broker(clock=\"manual\")) to advance it")
    ms = int(request["ms"])
    if ms < 0:
        raise ControlRefused(f"a clock advances forwards, not by {ms} ms (a clock-jump fault steps it back)")
    clock.advance(ms)
    with trio.move_on_after(SETTLE_TIMEOUT_S):
        await trio.testing.wait_all_tasks_blocked(SETTLE_CUSHION_S)
    return describe_clock(clock)


CLOCK_OPERATIONS = {"clock.now": clock_now, "clock.advance": clock_advance}
