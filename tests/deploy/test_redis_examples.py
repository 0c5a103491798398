"""Issue 28, point 22: deploy/redis-primary.conf, deploy/redis-replica.conf and
deploy/sentinel.conf as shipped (only their marked values moved onto loopback ports and into
a temporary directory), run by Debian's redis-server (the sentinels as `redis-server <conf>
--sentinel`): the replica copies the master with the password, three sentinels watch them,
`isp-gateway check-config --probe` finds each sentinel and the master through them; the
master is killed, the sentinels promote the replica, and the old master, started again with
its own file, becomes the new master's replica (its `masterauth`); the probe then finds the
new master. The two-host recipe of the docs, as far as one machine allows (the gateways
behind nginx through a failover: test_sentinel_failover.py)."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.conftest import REDIS_MISSING, Simulator, required_env
from tests.deploy.conftest import DEPLOY, render
from tests.support import SENTINEL_MASTER, base_env, free_port, run_cli


def shipped(name: str, setting: str) -> str:
    """A password as the shipped file holds it (the test uses the placeholders as they are)."""
    (value,) = re.findall(rf"^{setting} (\S+)$", (DEPLOY / name).read_text(), re.M)
    return value


PASSWORD = shipped("redis-primary.conf", "requirepass")
SENTINEL_PASSWORD = shipped("sentinel.conf", "requirepass")
DEADLINE = 30.0
# A sentinel whose timer ran late (a starved machine) enters TILT mode and acts on nothing
# for 30 s: the failover and the old master's return are waited for longer than that.
FAILOVER_DEADLINE = 75.0


@dataclass
class Server:
    port: int
    args: list[str]
    directory: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self, password: str) -> None:
        log = (self.directory / "out.log").open("ab")
        self.proc = subprocess.Popen(self.args, cwd=self.directory, stdout=log, stderr=log)
        log.close()
        wait(lambda: client(self.port, password).ping(), f"port {self.port} did not answer")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None


def client(port: int, password: str) -> redis.Redis:
    return redis.Redis(port=port, password=password, socket_timeout=2, decode_responses=True)


def wait(
    done: Callable[[], object],
    failure: str,
    deadline: float = DEADLINE,
    logs: Callable[[], str] = str,
) -> None:
    end = time.monotonic() + deadline
    while True:
        try:
            if done():
                return
        except redis.RedisError:
            pass
        assert time.monotonic() < end, f"{failure}\n{logs()}"
        time.sleep(0.1)


def written(directory: Path, name: str, values: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(render(name, values))
    return path


def linked(port: int, master: int) -> bool:
    info = client(port, PASSWORD).info("replication")
    return bool(
        info["role"] == "slave"
        and info["master_port"] == master
        and info["master_link_status"] == "up"
    )


@dataclass
class Group:
    primary: Server
    replica: Server
    sentinels: list[Server]

    def logs(self) -> str:
        """The last lines of each sentinel's and server's log, for a failure's message."""
        out = []
        for server in [*self.sentinels, self.primary, self.replica]:
            for path in (*server.directory.glob("sentinel.log"), server.directory / "out.log"):
                if path.is_file():
                    tail = path.read_text(errors="replace").splitlines()[-15:]
                    out.append(f"--- {path.parent.name}/{path.name}\n" + "\n".join(tail))
        return "\n".join(out)

    @property
    def addresses(self) -> str:
        return ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)

    def master_port(self) -> int | None:
        """The master's port as a majority of the sentinels that answer names it."""
        seen = []
        for sentinel in self.sentinels:
            try:
                found = client(sentinel.port, SENTINEL_PASSWORD).sentinel_get_master_addr_by_name(
                    SENTINEL_MASTER
                )
            except redis.RedisError:
                continue
            if found:
                seen.append(int(found[1]))
        top = max(set(seen), key=seen.count) if seen else None
        return top if top is not None and seen.count(top) >= 2 else None


@pytest.fixture
def group(tmp_path: Path) -> Iterator[Group]:
    server = shutil.which("redis-server")
    if server is None:  # the Redis tests fail, not skip, without a Redis to run
        pytest.fail(REDIS_MISSING, pytrace=False)
    ports = [free_port(), free_port()]
    # No disk: a restart begins empty, as a real one after a crash may begin behind.
    ephemeral = ["--appendonly", "no", "--save", ""]
    primary_conf = written(
        tmp_path / "primary",
        "redis-primary.conf",
        {"bind 10.0.0.5 127.0.0.1": "bind 127.0.0.1", "\nport 6379\n": f"\nport {ports[0]}\n"},
    )
    replica_conf = written(
        tmp_path / "replica",
        "redis-replica.conf",
        {
            "bind 10.0.0.6 127.0.0.1": "bind 127.0.0.1",
            "\nport 6379\n": f"\nport {ports[1]}\n",
            "replicaof 10.0.0.5 6379": f"replicaof 127.0.0.1 {ports[0]}",
        },
    )
    primary = Server(
        ports[0], [server, str(primary_conf), "--dir", str(primary_conf.parent), *ephemeral],
        primary_conf.parent,
    )  # fmt: skip
    replica = Server(
        ports[1], [server, str(replica_conf), "--dir", str(replica_conf.parent), *ephemeral],
        replica_conf.parent,
    )  # fmt: skip
    sentinels = []
    for n in range(3):
        port = free_port()
        directory = tmp_path / f"sentinel-{n}"
        conf = written(
            directory,
            "sentinel.conf",
            {
                "bind 10.0.0.5 127.0.0.1": "bind 127.0.0.1",
                "port 26379": f"port {port}",
                "/run/sentinel/redis-sentinel.pid": str(directory / "sentinel.pid"),
                "/var/log/redis/redis-sentinel.log": str(directory / "sentinel.log"),
                "dir /var/lib/redis": f"dir {directory}",
                "mymaster 10.0.0.5 6379 2": f"mymaster 127.0.0.1 {ports[0]} 2",
                "down-after-milliseconds mymaster 5000": "down-after-milliseconds mymaster 1000",
                "failover-timeout mymaster 60000": "failover-timeout mymaster 10000",
            },
        )
        # A sentinel is redis-server in sentinel mode: no redis-sentinel package needed.
        sentinels.append(Server(port, [server, str(conf), "--sentinel"], directory))
    group = Group(primary, replica, sentinels)
    try:
        primary.start(PASSWORD)
        replica.start(PASSWORD)
        wait(lambda: linked(replica.port, primary.port), "the replica never copied the master")
        for s in sentinels:
            s.start(SENTINEL_PASSWORD)

        def settled() -> bool:
            for s in sentinels:
                state = client(s.port, SENTINEL_PASSWORD).sentinel_master(SENTINEL_MASTER)
                if state["num-slaves"] < 1 or state["num-other-sentinels"] < 2:
                    return False
            return True

        wait(settled, "the sentinels never found the replica and one another")
        yield group
    finally:
        with ExitStack() as stack:
            for s in [*sentinels, replica, primary]:
                stack.callback(s.kill)


def probe(tmp_path: Path, password_hash: str, upstream: str, group: Group) -> list[str]:
    env = base_env(
        **{
            **required_env(password_hash),
            "UPSTREAM_NET_HOST": upstream,
            "REDIS_SENTINELS": group.addresses,
            "REDIS_SENTINEL_MASTER": SENTINEL_MASTER,
            "REDIS_PASSWORD": PASSWORD,
            "REDIS_SENTINEL_PASSWORD": SENTINEL_PASSWORD,
        }
    )
    result = run_cli("check-config", "--probe", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert PASSWORD not in result.stdout + result.stderr
    assert SENTINEL_PASSWORD not in result.stdout + result.stderr
    return result.stdout.splitlines()


def test_the_shipped_redis_and_sentinel_files_fail_over_and_back(
    group: Group, tmp_path: Path, password_hash: str, simulator: Simulator
) -> None:
    first = group.primary.port
    lines = probe(tmp_path, password_hash, simulator.url, group)
    for sentinel in group.sentinels:
        assert (
            f"ok    sentinel 127.0.0.1:{sentinel.port}: names master 'mymaster' at "
            f"127.0.0.1:{first}"
        ) in lines
    assert f"ok    Redis master 'mymaster' at 127.0.0.1:{first}: answers as the master" in lines

    group.primary.kill()
    wait(
        lambda: group.master_port() == group.replica.port,
        "the replica was never promoted",
        FAILOVER_DEADLINE,
        group.logs,
    )
    # The old master, started again with its own file, follows the new one: it logs in to
    # it with `masterauth` and copies it. On a starved machine the sentinels may then see the
    # new master miss its `down-after` and fail over once more, back to the old one (seen
    # under a busy core: within 2 s of its return, once it had joined as a replica, which a
    # sentinel promotes only with its link up): the two are then a master and its replica
    # the other way round, each logged in with its file's password. Either way the probe
    # must find the master the sentinels name.
    group.primary.start(PASSWORD)
    pair = (group.primary.port, group.replica.port)

    found: list[int] = []

    def settled() -> bool:
        """The master the sentinels name, noted once the other of the pair is its replica."""
        master = group.master_port()
        if master not in pair:
            return False
        other = pair[1] if master == pair[0] else pair[0]
        if not linked(other, master):
            return False
        found.append(master)
        return True

    wait(
        settled,
        "the old master never became the new master's replica",
        FAILOVER_DEADLINE,
        group.logs,
    )
    lines = probe(tmp_path, password_hash, simulator.url, group)
    new = f"127.0.0.1:{found[-1]}"
    assert f"ok    Redis master 'mymaster' at {new}: answers as the master" in lines
    for sentinel in group.sentinels:
        assert (
            f"ok    sentinel 127.0.0.1:{sentinel.port}: names master 'mymaster' at {new}" in lines
        )
