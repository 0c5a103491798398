"""Issue 28, point 16: `isp-gateway check-config --probe`, the real command, reaches what the
settings name (the upstream with the real key, Redis or each sentinel and their master, the
API keys file), one line a check, and names every failure with exit status 1. Plain
`check-config` reached none of them and said OK."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

import redis

from isp_gateway.auth import keys
from tests.conftest import Simulator, required_env, start_sentinel_group
from tests.support import SENTINEL_MASTER, RedisServer, SentinelGroup, base_env, free_port, run_cli

REDIS_PASSWORD = "redis-pass-0123456789"


def key_file(path: Path, names: tuple[str, ...] = ("whatsapp-bot",)) -> Path:
    keys.write_key_entries(
        path, [keys.new_entry(keys.generate_key(), name, ["*"], None) for name in names]
    )
    return path


def probe(tmp_path: Path, password_hash: str, **settings: str) -> tuple[int, list[str], str]:
    env = base_env(**{**required_env(password_hash), **settings})
    result = run_cli("check-config", "--probe", env=env, cwd=tmp_path)
    assert "Traceback" not in result.stderr, result.stderr
    assert REDIS_PASSWORD not in result.stdout + result.stderr
    assert required_env(password_hash)["UPSTREAM_NET_KEY"] not in result.stdout + result.stderr
    return result.returncode, result.stdout.strip().splitlines(), result.stderr


def test_everything_reached(
    tmp_path: Path, password_hash: str, simulator: Simulator, own_redis: RedisServer
) -> None:
    keys_path = key_file(tmp_path / "keys.json", ("a", "b"))
    with redis.Redis(port=own_redis.port) as client:
        client.config_set("requirepass", REDIS_PASSWORD)
    status, lines, err = probe(
        tmp_path,
        password_hash,
        UPSTREAM_NET_HOST=simulator.url,
        REDIS_URL=f"redis://:{REDIS_PASSWORD}@127.0.0.1:{own_redis.port}/3?health_check_interval=30",
        API_KEYS_FILE=str(keys_path),
    )
    assert (status, err) == (0, ""), lines
    assert lines == [
        f"configuration OK; upstream {simulator.url}",
        f"ok    upstream {simulator.url}: accepted our key, read one client (200 clients)",
        f"ok    Redis redis://127.0.0.1:{own_redis.port}/3: answers as the master",
        f"ok    API_KEYS_FILE {keys_path}: readable, 2 keys",
        "probe OK",
    ]
    # A wrong password is named as such.
    status, lines, err = probe(
        tmp_path,
        password_hash,
        UPSTREAM_NET_HOST=simulator.url,
        REDIS_URL=f"redis://:wrong-{REDIS_PASSWORD}@127.0.0.1:{own_redis.port}/3",
    )
    assert status == 1
    assert lines[2] == (
        f"FAIL  Redis redis://127.0.0.1:{own_redis.port}/3: refused the password (REDIS_URL)"
    )


def test_without_redis_nor_keys_it_says_so(
    tmp_path: Path, password_hash: str, simulator: Simulator
) -> None:
    status, lines, _ = probe(tmp_path, password_hash, UPSTREAM_NET_HOST=simulator.url)
    assert status == 0
    assert "ok    store: memory, this process only (no REDIS_URL or REDIS_SENTINELS)" in lines
    assert "ok    API keys: off (no API_KEYS_FILE)" in lines
    # A keys file not made yet holds no keys: that is no failure.
    status, lines, _ = probe(
        tmp_path,
        password_hash,
        UPSTREAM_NET_HOST=simulator.url,
        API_KEYS_FILE=str(tmp_path / "new.json"),
    )
    assert status == 0
    assert lines[-2] == (
        f"ok    API_KEYS_FILE {tmp_path / 'new.json'}: not created yet: no keys until "
        "`isp-gateway keys create`"
    )


def test_every_failure_is_named(tmp_path: Path, password_hash: str) -> None:
    upstream = f"http://127.0.0.1:{free_port()}"  # nobody listens on either
    redis_port = free_port()
    unreadable = tmp_path / "keys.json"
    unreadable.mkdir()  # a file the service cannot read (root reads any mode, not a directory)
    status, lines, err = probe(
        tmp_path,
        password_hash,
        UPSTREAM_NET_HOST=upstream,
        REDIS_URL=f"redis://:{REDIS_PASSWORD}@127.0.0.1:{redis_port}/0",
        API_KEYS_FILE=str(unreadable),
        REDIS_TIMEOUT_SECONDS="1",
    )
    assert status == 1
    assert lines[0] == f"configuration OK; upstream {upstream}"
    assert lines[1].startswith(f"FAIL  upstream {upstream}: unreachable (ConnectError")
    assert lines[2].startswith(f"FAIL  Redis redis://127.0.0.1:{redis_port}/0: unreachable (")
    keys_line = f"FAIL  API_KEYS_FILE {unreadable}: cannot be read (IsADirectoryError"
    assert lines[3].startswith(keys_line)
    assert err.splitlines() == [
        f"isp-gateway: probe failed: upstream {upstream}; Redis redis://127.0.0.1:{redis_port}/0; "
        f"API_KEYS_FILE {unreadable}"
    ]


def test_a_broken_keys_file_is_named(
    tmp_path: Path, password_hash: str, simulator: Simulator
) -> None:
    broken = tmp_path / "keys.json"
    broken.write_text('{"keys": [')
    status, lines, err = probe(
        tmp_path, password_hash, UPSTREAM_NET_HOST=simulator.url, API_KEYS_FILE=str(broken)
    )
    assert status == 1
    assert f"FAIL  API_KEYS_FILE {broken}: not valid JSON" in lines
    assert err.strip() == f"isp-gateway: probe failed: API_KEYS_FILE {broken}"


def test_an_upstream_refusing_our_key(
    tmp_path: Path, password_hash: str, simulator: Simulator
) -> None:
    status, lines, err = probe(
        tmp_path,
        password_hash,
        UPSTREAM_NET_HOST=simulator.url,
        UPSTREAM_NET_KEY="not-the-backend-key-123",
    )
    assert status == 1
    assert lines[1] == (
        f"FAIL  upstream {simulator.url}: refused our key (403): check UPSTREAM_NET_KEY"
    )
    assert "not-the-backend-key-123" not in "\n".join(lines) + err


def test_an_upstream_host_that_is_no_api(
    tmp_path: Path, password_hash: str, simulator: Simulator
) -> None:
    status, lines, _ = probe(
        tmp_path, password_hash, UPSTREAM_NET_HOST=simulator.url + "/somewhere-else"
    )
    assert status == 1
    assert lines[1] == (
        f"FAIL  upstream {simulator.url}/somewhere-else: answered 404 for /api/clientes/: is "
        "UPSTREAM_NET_HOST the backend's base address?"
    )


def test_a_redis_url_naming_a_replica(tmp_path: Path, password_hash: str) -> None:
    group = start_sentinel_group(tmp_path, replicas=1, sentinels=1, quorum=1)
    try:
        replica = group.replicas[0].port
        status, lines, _ = probe(tmp_path, password_hash, REDIS_URL=f"redis://127.0.0.1:{replica}")
    finally:
        group.stop()
    assert status == 1
    assert (
        f"FAIL  Redis redis://127.0.0.1:{replica}: answers as a slave, read-only: writes would fail"
    ) in lines


def test_each_sentinel_is_named(
    tmp_path: Path, password_hash: str, simulator: Simulator, sentinel_group: SentinelGroup
) -> None:
    missing = free_port()  # a sentinel nobody runs
    sentinels = f"{sentinel_group.addresses},127.0.0.1:{missing}"
    settings = {
        "UPSTREAM_NET_HOST": simulator.url,
        "REDIS_SENTINELS": sentinels,
        "REDIS_SENTINEL_MASTER": SENTINEL_MASTER,
        "REDIS_TIMEOUT_SECONDS": "1",
    }
    status, lines, err = probe(tmp_path, password_hash, **settings)
    master = f"127.0.0.1:{sentinel_group.master.port}"
    ours = [f"127.0.0.1:{sentinel.port}" for sentinel in sentinel_group.sentinels]
    for sentinel in ours:
        assert f"ok    sentinel {sentinel}: names master 'mymaster' at {master}" in lines
    assert any(
        line.startswith(f"FAIL  sentinel 127.0.0.1:{missing}: unreachable (") for line in lines
    )
    assert f"ok    Redis master 'mymaster' at {master}: answers as the master" in lines
    assert status == 1
    assert err.strip() == f"isp-gateway: probe failed: sentinel 127.0.0.1:{missing}"

    # One of ours stops, and the master's name is mistyped: each named.
    sentinel_group.sentinels[1].stop()
    settings["REDIS_SENTINELS"] = sentinel_group.addresses
    settings["REDIS_SENTINEL_MASTER"] = "mymastr"
    status, lines, err = probe(tmp_path, password_hash, **settings)
    assert status == 1
    assert f"FAIL  sentinel {ours[0]}: knows no master named 'mymastr'" in lines
    assert any(line.startswith(f"FAIL  sentinel {ours[1]}: unreachable (") for line in lines)
    assert "FAIL  Redis master 'mymastr': no sentinel named it" in lines
    assert err.strip() == (
        f"isp-gateway: probe failed: sentinel {ours[0]}; sentinel {ours[1]}; sentinel {ours[2]}; "
        "Redis master 'mymastr'"
    )


def test_a_sentinel_that_drops_the_connection_is_asked_once(
    tmp_path: Path, password_hash: str, simulator: Simulator
) -> None:
    """A probe asks each sentinel once and says what it found: redis-py's default would try
    a dropped connection four times, with growing waits, before the probe could say it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    accepted: list[int] = []

    def drop_each() -> None:
        with contextlib.suppress(OSError):  # closed at the end
            while True:
                conn, _ = listener.accept()
                accepted.append(1)
                conn.close()

    threading.Thread(target=drop_each, daemon=True).start()
    try:
        code, lines, _ = probe(
            tmp_path,
            password_hash,
            UPSTREAM_NET_HOST=simulator.url,
            REDIS_SENTINELS=f"127.0.0.1:{port}",
            REDIS_SENTINEL_MASTER=SENTINEL_MASTER,
        )
    finally:
        listener.close()
    assert code == 1
    assert any(line.startswith(f"FAIL  sentinel 127.0.0.1:{port}: ") for line in lines), lines
    assert len(accepted) == 1
