"""What the client-side commands share: the --bootstrap-server option, error reporting, progress on stderr, and
stopping on SIGINT/SIGTERM."""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

from minikafka.control_client import ControlClient, ControlError

if TYPE_CHECKING:
    from kafka import KafkaAdminClient

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "MINIKAFKA_BOOTSTRAP_SERVER"
# How long a command waits to reach the bootstrap broker before saying it cannot.
BOOTSTRAP_TIMEOUT_MS = 5000
# kafka-python's admin client raises a broker error with the whole request and response as its text, which is
# no message for a user: such an error is told by its code's name and meaning instead.
REQUEST_DUMP_PREFIX = "Request '"


class CommandError(Exception):
    """A command cannot do what was asked; the message is printed as `Error: ...` and the exit code is 1."""


class BrokerError(CommandError):
    """The broker answered with an error code: told by Kafka's name for it and the broker's error_message."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = code
        super().__init__(f"{kafka_error_name(code)}: {message or error_description(code)}")


def kafka_error_name(code: int) -> str:
    """Kafka's own name of an error code, as the broker and Kafka's tools say it (NOT_LEADER_OR_FOLLOWER, where
    kafka-python keeps the older NOT_LEADER_FOR_PARTITION)."""
    from kafka.errors import for_code

    from minikafka.protocol.errors import ErrorCode

    try:
        return ErrorCode(code).name
    except ValueError:
        return str(for_code(code).message)


def error_description(code: int) -> str:
    """What an error code means, in Kafka's words (its exception's documentation)."""
    from kafka.errors import for_code

    return str(for_code(code).description or "no description")


def error_line(exc: BaseException) -> str:
    """An error as one line. A broker's error code is told by Kafka's name for it and what the broker said (or,
    where the client kept no message of the broker's, what the code means)."""
    from kafka.errors import BrokerResponseError

    text = str(exc)
    if isinstance(exc, BrokerResponseError) and exc.errno is not None:
        detail = str(exc.args[0]) if exc.args else ""
        if not detail or detail.startswith(REQUEST_DUMP_PREFIX):
            detail = error_description(exc.errno)
        text = f"{kafka_error_name(exc.errno)}: {detail}"
    return " ".join(text.split())


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    """--bootstrap-server, and how to reach a secured listener: --command-config and -X, as Kafka's tools and kcat
    take client properties."""
    parser.add_argument("--bootstrap-server", "-b", dest="bootstrap_server",
                        default=os.environ.get(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP),
                        help=f"HOST:PORT of a broker (default ${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--command-config", help="a file of Kafka client properties (security.protocol, "
                                                 "sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...)")
    parser.add_argument("-X", dest="client_property", action="append", default=[], metavar="KEY=VALUE",
                        help="a client property, over --command-config's (repeatable)")


def client_settings(args: argparse.Namespace) -> dict[str, Any]:
    """kafka-python's security settings from --command-config and -X (none for a plaintext listener)."""
    from minikafka.client_properties import client_properties, kafka_python_settings

    return kafka_python_settings(client_properties(args.command_config,
                                                   parse_key_values(args.client_property, "-X")))


def control_client(args: argparse.Namespace) -> ControlClient:
    """The control API client of the --bootstrap-server broker, over its listener's security."""
    from minikafka.client_properties import client_properties, control_security

    props = client_properties(args.command_config, parse_key_values(args.client_property, "-X"))
    return ControlClient(args.bootstrap_server, security=control_security(props))


def admin_client(args: argparse.Namespace, client_id: str) -> KafkaAdminClient:
    """An admin client of the --bootstrap-server broker, which gives up on it after BOOTSTRAP_TIMEOUT_MS."""
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=args.bootstrap_server, client_id=client_id,
                            bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS, **client_settings(args))


def add_topic(parser: argparse.ArgumentParser, text: str, required: bool = False) -> None:
    """--topic, with kcat's -t, the same in every command that names a topic."""
    parser.add_argument("--topic", "-t", required=required, help=text)


def run_guarded(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command; expected failures (Kafka errors, refused faults, unreachable broker) become a one-line error."""
    from kafka.errors import KafkaError

    try:
        return command(args)
    except (CommandError, ControlError, KafkaError, OSError, ValueError, KeyError) as exc:
        print(f"Error: {error_line(exc)}", file=sys.stderr)
        return 1
    except Stopped as stopped:  # before the command could take the signal as its own
        return 128 + stopped.signum
    except KeyboardInterrupt:
        return 128 + signal.SIGINT


def parse_key_values(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(f"{what} expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out


class Stopped(BaseException):
    """SIGINT or SIGTERM interrupted a command (a BaseException, as KeyboardInterrupt, so that no client's
    `except Exception` takes it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StopSignals:
    """SIGINT and SIGTERM for the `with` block. The first one is kept (`requested`) and, with `interrupt`, raised
    as Stopped where the command is (a read of stdin waits for no flag); later ones are ignored, since what the
    command does on stopping is bounded already, so that a second Ctrl-C cannot cut it short (a consumer leaving
    its group).

    A command stopped by a signal exits 128 + the signal's number, as shells expect: 130 for SIGINT, 143 for
    SIGTERM.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, interrupt: bool) -> None:
        self.interrupt = interrupt
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}  # the handlers before the block, as signal.signal gives them

    def __enter__(self) -> StopSignals:
        self._previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.signum is not None:
            return
        self.signum = signum
        if self.interrupt:
            raise Stopped(signum)

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""

    @property
    def exit_code(self) -> int:
        return 128 + self.signum if self.signum is not None else 0


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
