"""`isp-gateway` as real processes: a CLI run, `serve` (one worker or two), any server a
supervisor would run, and the waits on them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from tests.support.ports import free_port
from tests.support.waiting import wait_until


def wait_for(url: str, deadline: float = 60.0, **kw: Any) -> httpx.Response:
    """The first answer of `url` (any status) within `deadline` seconds (a process that
    starts takes seconds on a machine shared with other suites; waiting costs only that)."""
    return wait_until(
        lambda: httpx.get(url, timeout=2, **kw),
        timeout=deadline,
        interval=0.05,
        message=f"{url} to answer",
        ignoring=httpx.HTTPError,
    )


def base_env(**extra: str) -> dict[str, str]:
    """A clean environment: none of the service's settings leak in from the test run."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "SYSTEMROOT")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def run_cli(
    *args: str, env: dict[str, str], cwd: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`isp-gateway *args` as a real subprocess (in `cwd`, with `env`), its output kept."""
    return subprocess.run(
        [sys.executable, "-m", "isp_gateway", *args],
        env=env,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def serve_args(port: int, *flags: str) -> list[str]:
    return [sys.executable, "-m", "isp_gateway", "serve", "--port", str(port), *flags]


@dataclass
class Serving:
    url: str
    proc: subprocess.Popen[str]
    output: str = ""  # all it wrote, once stopped


def default_sigint() -> None:
    """Popen's `preexec_fn` for a child a test stops with SIGINT, as Ctrl-C does: SIGINT at
    its default there, whatever this process inherited. A shell's background job has it
    ignored, and a Python child then ignores it too (it raises KeyboardInterrupt only where
    SIGINT was at its default when it started)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def serving(env: dict[str, str], cwd: Path, *flags: str) -> Iterator[Serving]:
    """`isp-gateway serve *flags` on a free port as a real process (in `cwd`, where no stray
    .env lies, with `env`), its stdout and stderr in one pipe: yields once /health answers,
    then stops it with SIGINT, as Ctrl-C does, and keeps all it wrote in `output`."""
    port = free_port()
    proc = subprocess.Popen(
        serve_args(port, *flags),
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    served = Serving(f"http://127.0.0.1:{port}", proc)
    try:
        wait_for(f"{served.url}/health", deadline=60)
        yield served
    finally:
        proc.send_signal(signal.SIGINT)
        served.output, _ = proc.communicate(timeout=30)


@contextmanager
def serving_workers(
    env: dict[str, str], cwd: Path, ready: str, stderr: IO[bytes] | None = None
) -> Iterator[str]:
    """`isp-gateway serve --workers 2` on a free port as a real process (in `cwd` with `env`,
    its stderr to `stderr`, else to the test's): yields its URL once `ready` answers 200,
    then terminates it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = serve_args(port, "--workers", "2")
    with server_process(args, env, cwd, stderr=stderr) as proc:
        wait_ready(url, proc, ready)
        yield url


@contextmanager
def server_process(
    args: list[str],
    env: dict[str, str],
    cwd: Path,
    stdout: IO[bytes] | None = None,
    stderr: IO[bytes] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """A server process as a supervisor runs it (`args`, e.g. a systemd unit's ExecStart),
    terminated at exit unless the test stopped it. Not waited for, so that a test can
    start several before it waits for each (`wait_ready`)."""
    proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=stdout, stderr=stderr)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=30)


def wait_ready(
    url: str, proc: subprocess.Popen[bytes], ready: str, deadline: float = 90, **kw: Any
) -> None:
    """Until `url + ready` answers 200 (`kw`: httpx's, e.g. `verify`); fails if `proc`
    exits first or `deadline` passes."""

    def ready_now() -> bool:
        assert proc.poll() is None, f"the server of {url} exited ({proc.returncode})"
        return httpx.get(f"{url}{ready}", timeout=5, **kw).status_code == 200

    wait_until(
        ready_now,
        timeout=deadline,
        interval=0.05,
        message=f"{url}{ready} to answer 200",
        ignoring=httpx.HTTPError,
    )
