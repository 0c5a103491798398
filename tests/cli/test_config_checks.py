"""Issue 17, configuration (CALLERS.md 2): the real `isp-gateway check-config` (and `serve`)
in a temp dir with a `.env` refuse placeholders, a secret of few characters and a key that
is no setting, naming each; FORWARDED_ALLOW_IPS is read from `.env` like every setting."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx

from isp_gateway.settings import PLACEHOLDERS
from tests.conftest import API_KEY, JWT_SECRET, required_env
from tests.support import base_env, free_port, run_cli, serving

EXAMPLE = Path(__file__).resolve().parents[2] / ".env.example"


def write_env(tmp_path: Path, password_hash: str, *extra: str) -> None:
    lines = [f"{k}='{v}'" for k, v in required_env(password_hash).items()]
    (tmp_path / ".env").write_text("\n".join([*lines, *extra]) + "\n")


def refused(tmp_path: Path) -> str:
    result = run_cli("check-config", env=base_env(), cwd=tmp_path)
    assert result.returncode == 2, result.stdout
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    return result.stderr


def test_a_copied_env_example_is_refused_naming_every_placeholder(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / ".env")
    message = refused(tmp_path)
    for name in PLACEHOLDERS:
        assert f"{name}: still the .env.example placeholder" in message, name
    for value in PLACEHOLDERS.values():
        assert value not in message


def test_one_placeholder_left_among_real_values_is_named(
    tmp_path: Path, password_hash: str
) -> None:
    write_env(tmp_path, password_hash, f"API_PASSWORD_HASH='{PLACEHOLDERS['API_PASSWORD_HASH']}'")
    message = refused(tmp_path)
    assert "API_PASSWORD_HASH: still the .env.example placeholder" in message
    assert "JWT_SECRET_KEY" not in message


def test_a_secret_of_two_characters_is_refused(tmp_path: Path, password_hash: str) -> None:
    write_env(tmp_path, password_hash, "JWT_SECRET_KEY=" + "xy" * 24)
    message = refused(tmp_path)
    assert "JWT_SECRET_KEY: must hold at least 16 different characters" in message
    assert "xyxy" not in message


def test_a_misspelled_key_in_env_is_refused_with_a_hint(tmp_path: Path, password_hash: str) -> None:
    write_env(tmp_path, password_hash, "CORS_ORIGIN=https://bot.example", "LOG_LEVLE=DEBUG")
    message = refused(tmp_path)
    assert "CORS_ORIGIN in .env is no setting (did you mean CORS_ORIGINS?)" in message
    assert "LOG_LEVLE in .env is no setting (did you mean LOG_LEVEL?)" in message
    # `serve` refuses the same way before starting anything.
    result = run_cli("serve", "--port", str(free_port()), env=base_env(), cwd=tmp_path)
    assert result.returncode == 2
    assert "CORS_ORIGIN in .env is no setting" in result.stderr


def test_typo_and_bad_value_are_named_together(tmp_path: Path, password_hash: str) -> None:
    write_env(tmp_path, password_hash, "CORS_ORIGIN=x", "LOG_LEVEL=chatty")
    message = refused(tmp_path)
    assert "LOG_LEVEL" in message and "CORS_ORIGIN in .env is no setting" in message


def test_variables_the_cli_reads_count_as_settings(tmp_path: Path, password_hash: str) -> None:
    write_env(
        tmp_path,
        password_hash,
        "FORWARDED_ALLOW_IPS=10.0.0.1,10.0.0.2",
        "SIMULATOR_API_KEY=sim-key-1",
        "PROMETHEUS_MULTIPROC_DIR=/tmp/x",
    )
    result = run_cli("check-config", env=base_env(), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "configuration OK" in result.stdout
    assert JWT_SECRET not in result.stdout and API_KEY not in result.stdout


def test_forwarded_allow_ips_is_read_from_env_file(tmp_path: Path, password_hash: str) -> None:
    """With the proxy trusted only at 10.9.9.9 (in .env), a loopback caller's
    X-Forwarded-For is ignored: two "different" forwarded addresses share one limit."""
    write_env(tmp_path, password_hash, "FORWARDED_ALLOW_IPS=10.9.9.9", "RATE_LIMIT_PER_MINUTE=1")
    with serving(base_env(SERVER="uvicorn"), tmp_path, "--proxy-headers") as served:
        statuses = [
            httpx.get(f"{served.url}/api/v1/nope", headers={"X-Forwarded-For": f"203.0.113.{n}"})
            for n in (1, 2)
        ]
        assert [r.status_code for r in statuses] == [404, 429]


def test_a_forwarded_allow_ips_entry_that_is_no_address_is_refused(
    tmp_path: Path, password_hash: str
) -> None:
    """uvicorn's reader keeps an entry it cannot parse as a literal that never matches an
    address: `10.0.0.7 10.0.0.8` (a space, not a comma), `10.0.0.0/33` or a host name left
    X-Forwarded-For untrusted without a word, and behind nginx every caller was counted
    under nginx's address (one caller's failed logins locked everyone)."""
    for value in ("10.0.0.7 10.0.0.8", "10.0.0.0/33", "nginx.internal", "10.0.0.1/8"):
        write_env(tmp_path, password_hash, f"FORWARDED_ALLOW_IPS='{value}'")
        message = refused(tmp_path)
        assert "FORWARDED_ALLOW_IPS" in message and repr(value.split(",")[0]) in message, message
    for value in ("10.0.0.7,10.0.0.8", "10.0.0.0/8, ::1", "*", "fd00::/8"):
        write_env(tmp_path, password_hash, f"FORWARDED_ALLOW_IPS='{value}'")
        result = run_cli("check-config", env=base_env(), cwd=tmp_path)
        assert result.returncode == 0, (value, result.stderr)


def test_an_upstream_address_with_a_password_or_a_query_is_refused(
    tmp_path: Path, password_hash: str
) -> None:
    """httpx made Basic auth of a user and password in UPSTREAM_NET_HOST, replacing the
    Api-Key header on every backend call (each 401), and check-config and the start-up line
    printed the password; a query put every call's path after it (`/?a=1/api/clientes/`).
    Both passed check-config."""
    for value in ("https://isp:pa55-w0rd@isp.example.com", "https://:pa55-w0rd@isp.example.com"):
        write_env(tmp_path, password_hash, f"UPSTREAM_NET_HOST='{value}'")
        message = refused(tmp_path)
        assert "UPSTREAM_NET_HOST: must not hold a user or password" in message
        assert "pa55-w0rd" not in message
    for value in ("https://isp.example.com/?tenant=1", "https://isp.example.com#x"):
        write_env(tmp_path, password_hash, f"UPSTREAM_NET_HOST='{value}'")
        assert "UPSTREAM_NET_HOST: must be a base address without ?query" in refused(tmp_path)
    write_env(tmp_path, password_hash, "UPSTREAM_NET_HOST='https://isp.example.com:8443/wisp/'")
    assert run_cli("check-config", env=base_env(), cwd=tmp_path).returncode == 0


def test_a_redis_url_redis_cannot_read_is_refused_without_its_password(
    tmp_path: Path, password_hash: str
) -> None:
    """A port that is no number (the `@` forgotten: the password read as the port), an
    unclosed IPv6 address, an option of the wrong type, a database that is no number (which
    redis-py quietly read as 0): check-config passed each, `check-config --probe` answered a
    traceback, `serve` 'cannot reach' quoting redis-py's reason."""
    for value in (
        "redis://:pa55-w0rd@127.0.0.1:notaport/0",
        "redis://:pa55-w0rd",
        "redis://:pa55-w0rd@[::1/0",
        "redis://:pa55-w0rd@127.0.0.1:6379/0?socket_timeout=soon",
        "redis://:pa55-w0rd@127.0.0.1:6379/sessions",
    ):
        write_env(tmp_path, password_hash, f"REDIS_URL='{value}'")
        message = refused(tmp_path)  # check-config: 2, one line, no traceback
        assert "REDIS_URL: " in message and "pa55-w0rd" not in message, value
        probed = run_cli("check-config", "--probe", env=base_env(), cwd=tmp_path)
        assert probed.returncode == 2, (value, probed.stderr)
        assert "Traceback" not in probed.stderr and "pa55-w0rd" not in probed.stderr
    for value in ("redis://:p@127.0.0.1:6379", "redis://[::1]:6379/2?socket_timeout=1"):
        write_env(tmp_path, password_hash, f"REDIS_URL='{value}'")
        assert run_cli("check-config", env=base_env(), cwd=tmp_path).returncode == 0, value


def test_an_api_keys_file_in_a_directory_that_does_not_exist_is_refused(
    tmp_path: Path, password_hash: str
) -> None:
    """A typo in the directory passed check-config and serve, which then held no keys for
    good (every bot 401); only `check-config --probe` named it. A file not made yet in a
    directory that exists is still fine."""
    missing = tmp_path / "isp-gatway" / "keys.json"
    write_env(tmp_path, password_hash, f"API_KEYS_FILE={missing}")
    message = refused(tmp_path)
    assert message.strip() == (
        f"isp-gateway: API_KEYS_FILE {missing}: its directory {missing.parent} does not exist"
    )
    result = run_cli("serve", "--port", str(free_port()), env=base_env(), cwd=tmp_path)
    assert result.returncode == 2 and "its directory" in result.stderr
    write_env(tmp_path, password_hash, f"API_KEYS_FILE={tmp_path / 'keys.json'}")
    assert run_cli("check-config", env=base_env(), cwd=tmp_path).returncode == 0
