"""`minikafka clock ...`: read and advance the manual clock of a running broker (or controller) for a test.

    minikafka clock now
    minikafka clock advance 45000

A node started with a manual clock (`minikafka.Broker(clock="manual")`, or `minikafka serve --clock manual
--testing`) runs its timers on a clock that `advance` moves forwards by that many milliseconds: the session
timeouts, transaction timeouts, retention checks and long polls due within the jump fire at once, and the command
returns once the node has run them (see docs/virtual-time.md). `now` prints the node's wall clock in ms since the
epoch, and how far it was advanced. A node on the system's clock refuses `advance`.
"""
from __future__ import annotations

import argparse

from minikafka.cli_common import add_bootstrap, control_client, run_guarded


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("clock", help="read or advance a test broker's manual clock",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="action", required=True)
    add_bootstrap(actions.add_parser("now", help="print the node's wall clock (ms since the epoch)"))
    advance = actions.add_parser("advance", help="move a manual clock forwards")
    add_bootstrap(advance)
    advance.add_argument("ms", type=int, help="how far, in milliseconds")


def run(args: argparse.Namespace) -> int:
    return run_guarded(_run, args)


def _run(args: argparse.Namespace) -> int:
    control = control_client(args)
    if args.action == "advance":
        answer = control.call("clock.advance", ms=args.ms)
    else:
        answer = control.call("clock.now")
    kind = "manual" if answer["manual"] else "system"
    print(f"{answer['now_ms']}\t({kind} clock, advanced {answer['advanced_ms']} ms)")
    return 0
