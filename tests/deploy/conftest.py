"""The files of deploy/ as shipped, rendered for a test run by plain text substitution of the
values they mark, the system tools their tests drive (a test skips without them, naming the
Debian package: `needs` in tests/support/tools.py), and deploy/nginx.conf run by Debian's
nginx in front of two replicas started with the systemd unit's own command line
(`run_edge`)."""

from __future__ import annotations

import getpass
import re
import shlex
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx

from tests.support import base_env, free_port, needs, server_process, tool_or_skip, wait_ready

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
UNIT = "isp-gateway@.service"
# The unit's ExecStart binary where docs/deployment.md's recipe installs it.
SHIPPED_BINARY = "/opt/isp-gateway/bin/isp-gateway"
# All of 127.0.0.0/8 is loopback on Linux: callers with addresses of their own.
MONITOR = "127.0.0.2"  # the allow-listed monitoring network, for the test
T = TypeVar("T")


def needs_edge(test: T) -> T:
    """Skip a test of `run_edge` where nginx or openssl (its certificate) is missing."""
    return needs("nginx")(needs("openssl")(test))


def render(name: str, values: Mapping[str, str]) -> str:
    """deploy/`name` with each marked value replaced. Each must be there as written: a file
    that changed under the test fails here instead of being tested half-rendered."""
    text = (DEPLOY / name).read_text()
    for old, new in values.items():
        assert old in text, f"deploy/{name} no longer holds {old!r}"
        text = text.replace(old, new)
    return text


def venv_binary() -> str:
    """This checkout's `isp-gateway` (next to the interpreter running the tests)."""
    binary = Path(sys.executable).parent / "isp-gateway"
    assert binary.is_file(), f"no {binary}: run `make install`"
    return str(binary)


def unit_exec_start() -> str:
    """The unit's ExecStart, running this checkout's `isp-gateway` instead of the installed one."""
    text = render(UNIT, {SHIPPED_BINARY: venv_binary()})
    (line,) = [line for line in text.splitlines() if line.startswith("ExecStart=")]
    return line.removeprefix("ExecStart=")


def unit_command(port: int) -> list[str]:
    """The command the unit runs for instance `port` (`isp-gateway@<port>`)."""
    return shlex.split(unit_exec_start().replace("%i", str(port)))


@dataclass
class Replica:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path


@dataclass
class Edge:
    """nginx in front of the replicas, and where it logs."""

    url: str
    tls: ssl.SSLContext
    replicas: list[Replica]
    access_log: Path

    @property
    def error_log(self) -> Path:
        return self.access_log.with_name("error.log")

    def client(self, source: str = MONITOR) -> httpx.Client:
        """An HTTPS client that trusts only the test's certificate, calling from `source`."""
        transport = httpx.HTTPTransport(verify=self.tls, local_address=source)
        return httpx.Client(base_url=self.url, transport=transport, timeout=30)

    def upstreams(self, after: int = 0) -> list[str]:
        """The `upstream=` field of each access-log line from byte `after` on: the replicas
        tried for a request, in order."""
        text = self.access_log.read_bytes()[after:].decode()
        return [m.group(1) for m in re.finditer(r"upstream=(.*?) upstream_status=", text)]


def self_signed(directory: Path) -> tuple[Path, Path]:
    openssl = tool_or_skip("openssl")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            *(openssl, "req", "-x509", "-nodes", "-days", "1", "-subj", "/CN=localhost"),
            *("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return cert, key


def nginx_conf(
    directory: Path,
    port: int,
    replicas: list[int],
    cert: Path,
    key: Path,
    changes: Mapping[str, str] | None = None,
) -> Path:
    """deploy/nginx.conf with its marked values moved into `directory` and onto loopback
    (and a test's own `changes`, each also required to be there)."""
    text = render(
        "nginx.conf",
        {
            **(changes or {}),
            "user www-data;": f"user {getpass.getuser()};",
            "/run/nginx.pid": str(directory / "nginx.pid"),
            "/var/log/nginx/": f"{directory}/",
            "/var/lib/nginx/": f"{directory}/",
            "listen 443 ssl;": f"listen 127.0.0.1:{port} ssl;",
            "server 127.0.0.1:8001 ": f"server 127.0.0.1:{replicas[0]} ",
            "server 127.0.0.1:8002 ": f"server 127.0.0.1:{replicas[1]} ",
            "/etc/ssl/isp-gateway/fullchain.pem": str(cert),
            "/etc/ssl/isp-gateway/privkey.pem": str(key),
            "10.0.0.0/8 1;": f"{MONITOR}/32 1;",
        },
    )
    path = directory / "nginx.conf"
    path.write_text(text)
    return path


@contextmanager
def run_edge(directory: Path, env: dict[str, str]) -> Iterator[Edge]:
    """Two replicas (the unit's command line, `env`), both ready, and nginx running
    deploy/nginx.conf in front of them, all with their files in `directory`; stopped at exit."""
    tool_or_skip("nginx")
    ports = [free_port(), free_port()]
    with ExitStack() as stack:
        replicas = []
        for port in ports:  # both start before either is waited for
            log = directory / f"replica-{port}.log"
            output = stack.enter_context(log.open("wb"))
            command = unit_command(port)
            proc = stack.enter_context(server_process(command, env, directory, output, output))
            replicas.append(Replica(f"http://127.0.0.1:{port}", proc, log))
        for replica in replicas:
            wait_ready(replica.url, replica.proc, "/ready")
        url, tls = stack.enter_context(run_nginx(directory, ports))
        yield Edge(url, tls, replicas, directory / "access.log")


@contextmanager
def run_nginx(
    directory: Path,
    replicas: list[int],
    changes: Mapping[str, str] | None = None,
    *,
    ready: bool = True,
) -> Iterator[tuple[str, ssl.SSLContext]]:
    """nginx running deploy/nginx.conf (with `changes`) in front of the replicas on these
    ports, its files in `directory`: its URL and the TLS context that trusts it, once its
    /health answers 200 (`ready`), or answers at all. Stopped at exit."""
    nginx = tool_or_skip("nginx")
    cert, key = self_signed(directory)
    port = free_port()
    conf = nginx_conf(directory, port, replicas, cert, key, changes)
    boot = directory / "boot.log"
    args = [nginx, "-p", str(directory), "-c", str(conf), "-e", str(boot), "-g", "daemon off;"]
    with server_process(args, base_env(), directory) as proc:
        tls = ssl.create_default_context(cafile=str(cert))
        url = f"https://127.0.0.1:{port}"
        try:
            if ready:
                wait_ready(url, proc, "/health", deadline=20, verify=tls)
            else:
                wait_answering(url, proc, tls)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {boot.read_text()}") from None
        yield url, tls


def wait_answering(url: str, proc: subprocess.Popen[bytes], tls: ssl.SSLContext) -> None:
    """Until nginx answers anything at all (its replicas may be down on purpose). Asked on
    a monitoring path, which nginx refuses itself to this address: a probe that reached a
    replica would count its timeout against it (max_fails=1), and the test's own request
    would then find no replica to try (a 502 where the test waits for a 504)."""
    end = time.monotonic() + 20
    while True:
        assert proc.poll() is None, f"nginx exited ({proc.returncode})"
        try:
            httpx.get(f"{url}/metrics", timeout=5, verify=tls)
            return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < end, f"{url} did not answer within 20 s"
        time.sleep(0.1)
