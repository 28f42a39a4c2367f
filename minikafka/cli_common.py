"""What the client-side commands share: the --bootstrap-server option, error reporting, progress on stderr."""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "MINIKAFKA_BOOTSTRAP_SERVER"
# How long a command waits to reach the bootstrap broker before saying it cannot.
BOOTSTRAP_TIMEOUT_MS = 5000


class CommandError(Exception):
    """A command cannot do what was asked; the message is printed as `Error: ...` and the exit code is 1."""


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", "-b", dest="bootstrap_server",
                        default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP),
                        help=f"HOST:PORT of a broker (default ${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP})")


def run_guarded(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command; expected failures (Kafka errors, refused faults, unreachable broker) become a one-line error."""
    from kafka.errors import KafkaError

    from minikafka.integration.control_client import ControlError

    try:
        return command(args)
    except (CommandError, ControlError, KafkaError, OSError, ValueError, KeyError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def parse_key_values(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(f"{what} expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out


class Progress:
    """A count reported on stderr every `interval_s` (only on a terminal unless forced), kcat-style."""

    def __init__(self, verb: str, interval_s: float = 1.0, enabled: bool | None = None) -> None:
        self.verb = verb
        self.interval_s = interval_s
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.count = 0
        self._last = time.monotonic()

    def add(self, n: int = 1) -> None:
        self.count += n
        now = time.monotonic()
        if self.enabled and now - self._last >= self.interval_s:
            self._last = now
            print(f"% {self.verb} {self.count} messages...", file=sys.stderr, flush=True)

    def done(self, detail: str = "") -> None:
        print(f"% {self.verb} {self.count} messages{detail}", file=sys.stderr, flush=True)
