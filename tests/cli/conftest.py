"""Fixtures for the command line's tests: the processes a test starts, and `isp-gateway demo`
up to its banner."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import base_env, free_port


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts; stopped (each by its own pid) if the test leaves them."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            # SIGINT first: a SIGKILLed granian parent leaves its worker running.
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate(timeout=10)


def demo_banner(
    cwd: Path, spawned: list[subprocess.Popen[str]], deadline: float = 90
) -> tuple[subprocess.Popen[str], list[str], int]:
    """`isp-gateway demo` (300 clients, no latency) on a free port in its own process group,
    like a terminal session: the process, the lines it printed up to its banner's last
    (`Ctrl-C`, within `deadline` seconds, or up to its exit) and its port."""
    port = free_port()
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "isp_gateway", "demo", "--port", str(port)),
            *("--clients", "300", "--latency", "0,0"),
        ],
        env=base_env(),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    spawned.append(proc)
    assert proc.stdout is not None
    lines: list[str] = []
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if "Ctrl-C" in line:
            break
    return proc, lines, port
