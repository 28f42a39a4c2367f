"""Holding a listener port for a broker across its restarts, so nothing else takes it while the broker is down.

On Linux a bound socket that never listens, with SO_REUSEADDR set, keeps its port out of the kernel's choice of
free ports (binds to port 0, outgoing connections) and refuses binds without SO_REUSEADDR, while the broker's own
listener (which sets SO_REUSEADDR, as trio's listeners do) can still bind and listen on it. Elsewhere
SO_REUSEADDR means something else, so no port is held and a restart simply binds the same port again.
"""
from __future__ import annotations

import socket
import sys


def reserve_port(host: str, port: int = 0) -> socket.socket | None:
    """A socket holding `port` (a free one for 0) on `host`; None where ports cannot be held or it is taken."""
    if sys.platform != "linux":
        return None
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except OSError:
        return None
    reservation = socket.socket(family, socket.SOCK_STREAM)
    try:
        reservation.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        reservation.bind((host, port))
    except OSError:
        reservation.close()
        return None  # in use: the broker's own bind reports it with the broker's words
    return reservation
