"""Throwaway Redis processes on loopback ports: a server (that a test can stop and start
again), a sentinel, and a master with its replicas and sentinels."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import redis

from tests.support.ports import free_port
from tests.support.waiting import wait_until


def _start_answering(args: list[str], port: int, timeout: float) -> subprocess.Popen[bytes]:
    """Start a Redis process (server or sentinel) and wait until it answers PING on `port`."""
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def answers() -> bool:
        if process.poll() is not None:
            err = process.stderr.read().decode() if process.stderr else ""
            raise RuntimeError(f"{args[0]} exited at start: {err.strip()[-300:]}")
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    try:
        message = f"{args[0]} to answer on port {port}"
        wait_until(answers, timeout=timeout, message=message, ignoring=OSError)
    except BaseException:
        _stop(process)
        raise
    return process


def _stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is not None and process.poll() is None:
        process.kill()
        process.wait(timeout=10)
    if process is not None and process.stderr is not None:
        process.stderr.close()


class RedisServer:
    """A throwaway `redis-server` on a free loopback port, without persistence, that a
    test can stop and start again on the same port (to see the service ride out an outage).
    `replica_of`: the port of its master; `directory`: where a replica keeps the copy it
    loads (the working directory otherwise)."""

    def __init__(
        self,
        port: int | None = None,
        *,
        replica_of: int | None = None,
        directory: Path | None = None,
    ) -> None:
        self.port = port or free_port()
        self.replica_of = replica_of
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("redis-server")
        # --save '' and --appendonly no: nothing is written to disk; each start is empty.
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
        # A replica's first copy starts at once (Redis waits 5 s for more replicas by default).
        args += ["--repl-diskless-sync-delay", "0"]
        if self.directory is not None:
            args += ["--dir", str(self.directory)]
        if self.replica_of is not None:
            args += ["--replicaof", "127.0.0.1", str(self.replica_of)]
        self.process = _start_answering(args, self.port, timeout)

    def stop(self) -> None:
        _stop(self.process)
        self.process = None


SENTINEL_MASTER = "mymaster"
SETTLE_PROBE = "sentinel-group:settled"


class RedisSentinel:
    """A throwaway sentinel on a free loopback port, watching the master on `master_port` as
    SENTINEL_MASTER: `redis-server <conf> --sentinel`, so the redis-server package alone is
    needed (Debian's redis-sentinel package adds only another name and a service for that
    binary). Its configuration file (which it rewrites as it learns replicas, other
    sentinels and failovers) lives in `directory`."""

    def __init__(
        self,
        directory: Path,
        master_port: int,
        *,
        quorum: int,
        down_after_ms: int,
        failover_timeout_ms: int,
    ) -> None:
        self.port = free_port()
        self.config = directory / f"sentinel-{self.port}.conf"
        self.config.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndaemonize no\ndir {directory}\n"
            f"logfile {directory / f'sentinel-{self.port}.log'}\n"
            f"sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {master_port} {quorum}\n"
            f"sentinel down-after-milliseconds {SENTINEL_MASTER} {down_after_ms}\n"
            f"sentinel failover-timeout {SENTINEL_MASTER} {failover_timeout_ms}\n"
            f"sentinel parallel-syncs {SENTINEL_MASTER} 1\n"
        )
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("redis-server")
        args = [binary, str(self.config), "--sentinel"]
        self.process = _start_answering(args, self.port, timeout)

    def stop(self) -> None:
        _stop(self.process)
        self.process = None


class SentinelGroup:
    """A master, its replicas and the sentinels that watch them, all throwaway processes on
    loopback ports with their files in `directory`. `start` returns once every replica has
    copied the master and every sentinel knows the replicas and the other sentinels (so a
    failover can be agreed on)."""

    def __init__(
        self,
        directory: Path,
        *,
        replicas: int = 1,
        sentinels: int = 3,
        quorum: int = 2,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 2000,
    ) -> None:
        self.master = RedisServer(directory=directory)
        self.replicas = [
            RedisServer(replica_of=self.master.port, directory=directory) for _ in range(replicas)
        ]
        self.sentinels = [
            RedisSentinel(
                directory,
                self.master.port,
                quorum=quorum,
                down_after_ms=down_after_ms,
                failover_timeout_ms=failover_timeout_ms,
            )
            for _ in range(sentinels)
        ]

    @property
    def addresses(self) -> str:
        """The sentinels as REDIS_SENTINELS takes them."""
        return ",".join(f"127.0.0.1:{sentinel.port}" for sentinel in self.sentinels)

    def start(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        try:
            for server in [self.master, *self.replicas]:
                server.start()
            for sentinel in self.sentinels:
                sentinel.start()
            self._wait(deadline, self._settled, "the replicas and sentinels to settle")
        except BaseException:
            self.stop()
            raise

    def _settled(self) -> bool:
        # A replica's link is up before the master streams writes to it (up to a second
        # later, after a full copy): a write must have reached every replica.
        with redis.Redis(port=self.master.port, socket_timeout=1) as client:
            client.set(SETTLE_PROBE, "1")
        for replica in self.replicas:
            with redis.Redis(port=replica.port, socket_timeout=1) as client:
                if client.get(SETTLE_PROBE) is None:
                    return False
        for sentinel in self.sentinels:
            with redis.Redis(port=sentinel.port, socket_timeout=1) as client:
                state = client.sentinel_master(SENTINEL_MASTER)
            if state["num-slaves"] < len(self.replicas):
                return False
            if state["num-other-sentinels"] < len(self.sentinels) - 1:
                return False
        return True

    def master_port(self) -> int | None:
        """The master's port as the first sentinel that answers names it."""
        for sentinel in self.sentinels:
            if sentinel.process is None:
                continue
            try:
                with redis.Redis(port=sentinel.port, socket_timeout=1) as client:
                    address = client.sentinel_get_master_addr_by_name(SENTINEL_MASTER)
            except redis.RedisError:
                continue
            if address:
                return int(address[1])
        return None

    @staticmethod
    def _wait(deadline: float, done: Callable[[], bool], what: str) -> None:
        timeout = max(0.0, deadline - time.monotonic())
        wait_until(done, timeout=timeout, message=what, ignoring=redis.RedisError)

    def stop(self) -> None:
        for process in [*self.sentinels, *self.replicas, self.master]:
            process.stop()
