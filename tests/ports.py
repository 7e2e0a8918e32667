"""Free loopback ports for servers a test starts later (a JVM, a Spark master, an HTTP exporter).

A port found by binding port 0 comes from the kernel's ephemeral range, the
same range every outgoing connection takes its local port from. Between the
moment it is chosen and the moment the server binds it (seconds for a JVM),
any client connection on the machine can take it: a CI run lost a whole
module to ``BindException: Address already in use`` that way. So these ports
come from just below the ephemeral range, where the kernel hands out nothing
by itself, and each is checked to be bindable when chosen. Two test workers
can still draw the same port (rarely); a starter that can, retries with new
ports (``tests/reference/apache_kafka.py``).
"""

from __future__ import annotations

import random
import socket

# how far below the ephemeral range to draw from: wide enough that two workers rarely meet
_SPAN = 12000
_FLOOR = 1024


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ephemeral_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports, free now and outside the range outgoing connections use."""
    high = _ephemeral_low() - 1
    low = max(_FLOOR, high - _SPAN)
    rng = random.SystemRandom()  # not the tests' seeded random: two workers must not draw alike
    chosen: list[int] = []
    tries = 50 * n if high - low >= 100 else 0
    while len(chosen) < n and tries > 0:
        tries -= 1
        port = rng.randint(low, high)
        if port not in chosen and _bindable(port):
            chosen.append(port)
    while len(chosen) < n:  # no room below the ephemeral range on this machine: the kernel's choice
        port = _ephemeral_port()
        if port not in chosen:
            chosen.append(port)
    return chosen


def free_port() -> int:
    """One loopback port, as ``free_ports``."""
    return free_ports(1)[0]
