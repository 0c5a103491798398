"""Loopback ports for servers a test starts by number."""

from __future__ import annotations

import os
import random
import socket

# Ports for servers started later by number (a subprocess, a Redis restarted on the same port)
# come from below the kernel's ephemeral range (32768 and up on Linux), where port 0 binds and
# every outgoing connection takes its local port: a port chosen there could be taken by a
# client connection between the choice and the server's bind. Each xdist worker draws from its
# own block, so two workers of a run never pick the same port.
_PORT_LOW, _PORT_HIGH = 10_000, 32_000
_handed_out: set[int] = set()


def free_port() -> int:
    """A loopback port free now, from this worker's block, never handed out twice."""
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) % workers if worker.isdigit() else 0
    size = (_PORT_HIGH - _PORT_LOW) // workers
    low = _PORT_LOW + index * size
    for _ in range(200):
        port = random.randrange(low, low + size)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free loopback port in {low}-{low + size}")
