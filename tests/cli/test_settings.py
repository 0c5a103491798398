"""Settings: names, defaults, list parsing, and the one-line refusal of a bad configuration."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from isp_gateway.settings import (
    DEFAULT_CORS_ORIGINS,
    PLACEHOLDERS,
    ConfigurationError,
    Settings,
    load_settings,
)
from tests.conftest import API_KEY, JWT_SECRET, USERNAME, required_env

REQUIRED = ("UPSTREAM_NET_KEY", "UPSTREAM_NET_HOST", "JWT_SECRET_KEY", "API_USERNAME")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No setting in the environment and no stray `.env` in the working directory."""
    for name in Settings.model_fields:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


@pytest.fixture
def valid_env(clean_env: pytest.MonkeyPatch, password_hash: str) -> pytest.MonkeyPatch:
    """clean_env with the required settings in the environment, valid."""
    for name, value in required_env(password_hash).items():
        clean_env.setenv(name, value)
    return clean_env


def values(password_hash: str, **overrides: Any) -> dict[str, Any]:
    return {**required_env(password_hash), "_env_file": None, **overrides}


def refusal(password_hash: str, **overrides: Any) -> str:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(**values(password_hash, **overrides))
    return str(caught.value)


def test_defaults_follow_the_spec_and_decisions(clean_env: Any, password_hash: str) -> None:
    s = load_settings(**values(password_hash))
    assert s.JWT_ALGORITHM == "HS256"
    assert s.JWT_ACCESS_TOKEN_EXPIRE_MINUTES == 60
    assert s.UPSTREAM_TIMEOUT_SECONDS == 10.0
    assert s.MAX_ACTIVE_TICKETS_PER_ZONE == 3
    assert s.ACTIVE_TICKET_STATES == [1]
    assert s.MAX_TICKET_RESOLUTION_DAYS == 3
    assert s.CLIENT_CACHE_SECONDS == 300
    assert s.PLAN_CACHE_SECONDS == 900
    assert s.STALE_IF_ERROR_SECONDS == 3600
    assert s.UPSTREAM_PAGE_SIZE == 500
    assert (s.UPSTREAM_RATE_PER_MINUTE, s.UPSTREAM_RATE_PER_HOUR) == (100, 1000)
    assert (s.LOGIN_MAX_FAILURES, s.LOGIN_LOCKOUT_SECONDS) == (5, 900)
    assert s.TIMEZONE == "America/Bogota"
    assert s.HOLIDAYS_COUNTRY == "CO"
    assert s.ACTIVE_CLIENT_STATES == ["Activo"]
    assert s.PHONE_COUNTRY_CODE == "57"
    assert s.RATE_LIMIT_PER_MINUTE == 0
    assert s.REDIS_URL is None
    assert s.CORS_ORIGINS == DEFAULT_CORS_ORIGINS
    assert len(DEFAULT_CORS_ORIGINS) == 5


def test_secrets_are_secret_str(clean_env: Any, password_hash: str) -> None:
    s = load_settings(**values(password_hash))
    shown = repr(s) + str(s.model_dump())
    assert API_KEY not in shown
    assert JWT_SECRET not in shown
    assert password_hash not in shown
    assert s.UPSTREAM_NET_KEY.get_secret_value() == API_KEY


def test_read_from_environment(valid_env: pytest.MonkeyPatch) -> None:
    valid_env.setenv("ACTIVE_TICKET_STATES", "1,2")
    valid_env.setenv("CORS_ORIGINS", '["https://bot.example.com", "http://localhost:3000"]')
    valid_env.setenv("EXTRA_HOLIDAYS", "2026-12-24, 2026-12-31")
    valid_env.setenv("ACTIVE_CLIENT_STATES", "Activo,Gratis")
    valid_env.setenv("MAX_ACTIVE_TICKETS_PER_ZONE", "5")
    s = load_settings()
    assert s.API_USERNAME == USERNAME
    assert s.ACTIVE_TICKET_STATES == [1, 2]
    assert s.CORS_ORIGINS == ["https://bot.example.com", "http://localhost:3000"]
    assert s.EXTRA_HOLIDAYS == ["2026-12-24", "2026-12-31"]
    assert s.ACTIVE_CLIENT_STATES == ["Activo", "Gratis"]
    assert s.MAX_ACTIVE_TICKETS_PER_ZONE == 5


@pytest.mark.parametrize("raw", ["1,2", "[1,2]", " 1 , 2 ", "[1, 2]"])
def test_list_settings_accept_csv_and_json(valid_env: pytest.MonkeyPatch, raw: str) -> None:
    valid_env.setenv("ACTIVE_TICKET_STATES", raw)
    assert load_settings().ACTIVE_TICKET_STATES == [1, 2]
    assert load_settings(ACTIVE_TICKET_STATES=raw).ACTIVE_TICKET_STATES == [1, 2]


def test_a_broken_json_list_is_named_with_the_accepted_forms(valid_env: pytest.MonkeyPatch) -> None:
    valid_env.setenv("CORS_ORIGINS", '["http://a.example"')
    with pytest.raises(ConfigurationError) as caught:
        load_settings()
    assert "CORS_ORIGINS: not a JSON list" in str(caught.value)


def test_dotenv_file_is_read_and_environment_wins(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, password_hash: str
) -> None:
    lines = [f"{k}={v}" for k, v in required_env(password_hash).items()]
    lines.append("MAX_TICKET_RESOLUTION_DAYS=5")
    lines.append("PLAN_CACHE_SECONDS=120")
    (tmp_path / ".env").write_text("\n".join(lines) + "\n")
    clean_env.setenv("PLAN_CACHE_SECONDS", "60")
    s = load_settings()
    assert s.MAX_TICKET_RESOLUTION_DAYS == 5
    assert s.PLAN_CACHE_SECONDS == 60
    assert s.API_USERNAME == USERNAME


def test_names_are_case_sensitive(valid_env: pytest.MonkeyPatch) -> None:
    valid_env.delenv("UPSTREAM_NET_KEY")
    valid_env.setenv("upstream_net_key", API_KEY)
    with pytest.raises(ConfigurationError, match="UPSTREAM_NET_KEY is required"):
        load_settings()


def test_every_missing_variable_is_named_in_one_line(clean_env: Any) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(_env_file=None)
    message = str(caught.value)
    assert "\n" not in message
    for name in (*REQUIRED, "API_PASSWORD_HASH"):
        assert f"{name} is required" in message
    assert "Traceback" not in message


def test_invalid_values_are_all_named_and_never_echoed(clean_env: Any, password_hash: str) -> None:
    short_secret = "short-jwt-secret-abc"
    message = refusal(
        password_hash,
        JWT_SECRET_KEY=short_secret,
        UPSTREAM_NET_KEY="   ",
        API_PASSWORD_HASH="plain-text-password-oops",
        UPSTREAM_NET_HOST="isp.example.com",
        TIMEZONE="Mars/Olympus",
        HOLIDAYS_COUNTRY="XX",
        EXTRA_HOLIDAYS="2026-13-40",
        JWT_ALGORITHM="RS256",
        MAX_ACTIVE_TICKETS_PER_ZONE="many",
    )
    assert "\n" not in message
    for name in (
        "JWT_SECRET_KEY",
        "UPSTREAM_NET_KEY",
        "API_PASSWORD_HASH",
        "UPSTREAM_NET_HOST",
        "TIMEZONE",
        "HOLIDAYS_COUNTRY",
        "EXTRA_HOLIDAYS",
        "JWT_ALGORITHM",
        "MAX_ACTIVE_TICKETS_PER_ZONE",
    ):
        assert name in message, name
    assert short_secret not in message
    assert "plain-text-password-oops" not in message


# 64 different characters: a secret of any length up to 64 that fails only on its length
# (CALLERS.md 2 also asks for 16 different characters; "x" * 32 is refused for that now).
VARIED = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"


def test_short_jwt_secret_refused(clean_env: Any, password_hash: str) -> None:
    assert "JWT_SECRET_KEY: must be at least 32 bytes" in refusal(
        password_hash, JWT_SECRET_KEY=VARIED[:31]
    )
    assert load_settings(**values(password_hash, JWT_SECRET_KEY=VARIED[:32]))


@pytest.mark.parametrize("alg", ["none", "RS256", "ES256", "hs256", ""])
def test_only_hmac_algorithms(clean_env: Any, password_hash: str, alg: str) -> None:
    assert "JWT_ALGORITHM" in refusal(password_hash, JWT_ALGORITHM=alg)


@pytest.mark.parametrize("alg", ["HS256", "HS384", "HS512"])
def test_hmac_algorithms_accepted(clean_env: Any, password_hash: str, alg: str) -> None:
    loaded = load_settings(**values(password_hash, JWT_ALGORITHM=alg, JWT_SECRET_KEY=VARIED))
    assert alg == loaded.JWT_ALGORITHM


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TIMEZONE", "Not/AZone"),
        ("HOLIDAYS_COUNTRY", "ZZ"),
        ("EXTRA_HOLIDAYS", "24/12/2026"),
        ("EXTRA_HOLIDAYS", "[2026-12-24"),
        ("ACTIVE_TICKET_STATES", ""),
        ("ACTIVE_TICKET_STATES", "open"),
        ("PHONE_COUNTRY_CODE", "+57"),
        ("UPSTREAM_PAGE_SIZE", "0"),
        ("TICKET_SUBJECTS_FILE", "/nonexistent/subjects.json"),
        ("LOG_LEVEL", "verbose"),
        ("REDIS_URL", "localhost:6379"),
        ("UPSTREAM_NET_HOST", "http://"),
        ("UPSTREAM_NET_HOST", "https:///api"),
    ],
)
def test_invalid_setting_named(clean_env: Any, password_hash: str, name: str, value: str) -> None:
    assert name in refusal(password_hash, **{name: value})


def test_holidays_country_normalised(clean_env: Any, password_hash: str) -> None:
    assert load_settings(**values(password_hash, HOLIDAYS_COUNTRY="co")).HOLIDAYS_COUNTRY == "CO"


def test_upstream_host_trailing_slash_dropped(clean_env: Any, password_hash: str) -> None:
    s = load_settings(**values(password_hash, UPSTREAM_NET_HOST="https://isp.example.com/"))
    assert s.UPSTREAM_NET_HOST == "https://isp.example.com"


def test_empty_optional_settings_mean_unset(valid_env: pytest.MonkeyPatch) -> None:
    # docker-compose and .env files often carry `REDIS_URL=`: that means "no Redis".
    valid_env.setenv("REDIS_URL", "")
    valid_env.setenv("TICKET_SUBJECTS_FILE", "")
    s = load_settings()
    assert s.REDIS_URL is None
    assert s.TICKET_SUBJECTS_FILE is None


def test_redis_url_with_password_is_not_echoed(clean_env: Any, password_hash: str) -> None:
    message = refusal(password_hash, REDIS_URL="localhost:6379/0?password=hunter2hunter2")
    assert "REDIS_URL" in message
    assert "hunter2" not in message
    ok = load_settings(**values(password_hash, REDIS_URL="redis://:pw@127.0.0.1:6379/2"))
    assert ok.REDIS_URL is not None


def test_log_level_case_insensitive(clean_env: Any, password_hash: str) -> None:
    assert load_settings(**values(password_hash, LOG_LEVEL="debug")).LOG_LEVEL == "DEBUG"


@pytest.mark.parametrize(("alg", "needed"), [("HS384", 48), ("HS512", 64)])
def test_longer_hmacs_need_longer_secrets(
    clean_env: Any, password_hash: str, alg: str, needed: int
) -> None:
    message = refusal(password_hash, JWT_ALGORITHM=alg, JWT_SECRET_KEY=VARIED[: needed - 1])
    assert message == (
        f"invalid configuration: JWT_SECRET_KEY: must be at least {needed} bytes long for {alg}"
    )
    assert load_settings(**values(password_hash, JWT_ALGORITHM=alg, JWT_SECRET_KEY=VARIED[:needed]))


def test_subjects_file_named(clean_env: Any, password_hash: str, tmp_path: Path) -> None:
    message = refusal(password_hash, TICKET_SUBJECTS_FILE=str(tmp_path / "none.json"))
    assert message.startswith("invalid configuration: TICKET_SUBJECTS_FILE: no such file")


def test_env_example_documents_every_setting_with_its_default(
    valid_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    example = Path(__file__).resolve().parents[2] / ".env.example"
    names = [
        line.split("=", 1)[0]
        for line in example.read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert sorted(names) == sorted(Settings.model_fields)
    assert len(names) == len(set(names))
    # Loaded as a .env with the placeholders overridden, every other value is the default.
    (tmp_path / ".env").write_text(example.read_text())
    from_example = load_settings()
    defaults = load_settings(_env_file=None)
    for name in Settings.model_fields:
        assert getattr(from_example, name) == getattr(defaults, name), name


def test_configuration_page_names_every_setting() -> None:
    """docs/configuration.md's "Every setting" names each setting, and none that is gone."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    named = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", page.split("## Every setting", 1)[1]))
    assert named == set(Settings.model_fields)


def test_env_example_placeholder_secret_is_refused(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Copying .env.example without editing it must not start a service with a known secret.
    example = Path(__file__).resolve().parents[2] / ".env.example"
    (tmp_path / ".env").write_text(example.read_text())
    with pytest.raises(ConfigurationError, match="JWT_SECRET_KEY"):
        load_settings()


def test_placeholders_are_env_example_s_required_block() -> None:
    """The one list of placeholders is what `.env.example`'s required block holds."""
    example = Path(__file__).resolve().parents[2] / ".env.example"
    text = example.read_text()
    block = text.split("# --- Required", 1)[1].split("\n# --- ", 1)[0].splitlines()[1:]
    held = dict(line.split("=", 1) for line in block if line and not line.startswith("#"))
    assert {name: value.strip("'") for name, value in held.items()} == PLACEHOLDERS
    assert set(PLACEHOLDERS) == {n for n, f in Settings.model_fields.items() if f.is_required()}


@pytest.mark.parametrize("name", sorted(PLACEHOLDERS))
def test_each_placeholder_is_refused_by_name(clean_env: Any, password_hash: str, name: str) -> None:
    message = refusal(password_hash, **{name: f"  {PLACEHOLDERS[name]} "})
    assert (
        message
        == f"invalid configuration: {name}: still the .env.example placeholder; set the real value"
    )


@pytest.mark.parametrize(
    "secret",
    [
        "ab" * 24,  # 48 bytes, 2 characters
        "0123456789abcde" * 4,  # 60 bytes, 15 characters
        "x" * 64,
    ],
)
def test_a_long_secret_of_few_characters_is_refused(
    clean_env: Any, password_hash: str, secret: str
) -> None:
    message = refusal(password_hash, JWT_SECRET_KEY=secret)
    assert "JWT_SECRET_KEY: must hold at least 16 different characters" in message
    assert secret not in message
    assert load_settings(**values(password_hash, JWT_SECRET_KEY="0123456789abcdef" * 2))


def test_redis_through_sentinel(clean_env: pytest.MonkeyPatch, password_hash: str) -> None:
    sentinel_env = {
        "REDIS_SENTINELS": " 10.0.0.5:26379, sentinel-2:26380,[::1]:26381 ",
        "REDIS_SENTINEL_MASTER": "mymaster",
        "REDIS_PASSWORD": "master-pass-123",
        "REDIS_SENTINEL_PASSWORD": "sentinel-pass-456",
    }
    for name, value in {**required_env(password_hash), **sentinel_env}.items():
        clean_env.setenv(name, value)
    s = load_settings()
    assert s.REDIS_SENTINELS == [("10.0.0.5", 26379), ("sentinel-2", 26380), ("::1", 26381)]
    assert s.REDIS_SENTINEL_MASTER == "mymaster"
    assert s.REDIS_PASSWORD is not None and s.REDIS_SENTINEL_PASSWORD is not None
    assert s.REDIS_PASSWORD.get_secret_value() == "master-pass-123"
    assert s.uses_redis and s.REDIS_URL is None
    # The JSON form too; and blank values mean "not set", as for REDIS_URL.
    clean_env.setenv("REDIS_SENTINELS", '["10.0.0.5:26379"]')
    assert load_settings().REDIS_SENTINELS == [("10.0.0.5", 26379)]
    for name in ("REDIS_SENTINELS", "REDIS_SENTINEL_MASTER", "REDIS_PASSWORD"):
        clean_env.setenv(name, "")
    clean_env.setenv("REDIS_SENTINEL_PASSWORD", " ")
    s = load_settings()
    assert s.REDIS_SENTINELS == [] and s.REDIS_SENTINEL_MASTER is None
    assert s.REDIS_PASSWORD is None and s.REDIS_SENTINEL_PASSWORD is None
    assert not s.uses_redis


def test_sentinels_listed_from_a_v6_address(
    clean_env: pytest.MonkeyPatch, password_hash: str
) -> None:
    """`[v6]:port` first in the list was read as a JSON list, and refused as "not a JSON
    list": sentinels on IPv6 addresses only could not be named at all."""
    for name, value in required_env(password_hash).items():
        clean_env.setenv(name, value)
    clean_env.setenv("REDIS_SENTINEL_MASTER", "mymaster")
    clean_env.setenv("REDIS_SENTINELS", "[fd00::5]:26379, [fd00::6]:26379,10.0.0.7:26379")
    assert load_settings().REDIS_SENTINELS == [
        ("fd00::5", 26379),
        ("fd00::6", 26379),
        ("10.0.0.7", 26379),
    ]
    clean_env.setenv("REDIS_SENTINELS", '["[fd00::5]:26379"]')
    assert load_settings().REDIS_SENTINELS == [("fd00::5", 26379)]


SENTINELS = {"REDIS_SENTINELS": "127.0.0.1:26379", "REDIS_SENTINEL_MASTER": "mymaster"}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {**SENTINELS, "REDIS_URL": "redis://127.0.0.1:6379/0"},
            "REDIS_URL and REDIS_SENTINELS: set one of them, not both",
        ),
        ({"REDIS_SENTINELS": "127.0.0.1:26379"}, "REDIS_SENTINEL_MASTER is required"),
        ({"REDIS_SENTINEL_MASTER": "mymaster"}, "REDIS_SENTINEL_MASTER: only read with"),
        (
            {"REDIS_URL": "redis://127.0.0.1:6379/0", "REDIS_PASSWORD": "hunter2hunter2"},
            "REDIS_PASSWORD: only read with REDIS_SENTINELS",
        ),
        (
            {"REDIS_SENTINEL_PASSWORD": "hunter2hunter2"},
            "REDIS_SENTINEL_PASSWORD: only read with REDIS_SENTINELS",
        ),
        ({**SENTINELS, "REDIS_SENTINELS": "redis1"}, "REDIS_SENTINELS: 'redis1' is not host:port"),
        ({**SENTINELS, "REDIS_SENTINELS": "a:1,b"}, "REDIS_SENTINELS: 'b' is not host:port"),
        ({**SENTINELS, "REDIS_SENTINELS": ":26379"}, "':26379' is not host:port"),
        ({**SENTINELS, "REDIS_SENTINELS": "::1:26379"}, "'::1:26379' is not host:port"),
        ({**SENTINELS, "REDIS_SENTINELS": "a:port"}, "'a:port': the port must be a number"),
        ({**SENTINELS, "REDIS_SENTINELS": "a:70000"}, "'a:70000': the port must be a number"),
        ({**SENTINELS, "REDIS_SENTINELS": "a:1, a:1"}, "REDIS_SENTINELS: names a sentinel twice"),
        ({**SENTINELS, "REDIS_SENTINELS": " , "}, "REDIS_SENTINELS: must list at least one"),
        ({**SENTINELS, "REDIS_SENTINEL_MASTER": "my master"}, "REDIS_SENTINEL_MASTER: must be"),
    ],
)
def test_redis_settings_that_do_not_fit_together_are_named(
    clean_env: Any, password_hash: str, overrides: dict[str, str], expected: str
) -> None:
    message = refusal(password_hash, **overrides)
    assert message.startswith("invalid configuration: ")
    assert expected in message
    assert "hunter2" not in message
