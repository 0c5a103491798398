"""The checks of the settings (settings/__init__.py): one function per rule, each raising a
ValueError whose text names what is wrong and never echoes a secret. Field rules are
attached to their fields (`Annotated[..., AfterValidator(...)]`); `across` checks the rules
that involve several settings."""

from __future__ import annotations

import ipaddress
import json
import re
from datetime import date
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import SecretStr, ValidationInfo

if TYPE_CHECKING:
    from isp_gateway.settings import Settings

# HS256 needs a key at least as long as its output; shorter secrets are brute-forceable.
MIN_SECRET_BYTES = 32
# A long secret of few characters ("aaaa...", "abab...") is no secret (CALLERS.md 2).
MIN_SECRET_DISTINCT_CHARS = 16

# The values `.env.example`'s required block holds (a test keeps the two the same): a
# setting still holding one was copied and never filled in, and is refused, named.
PLACEHOLDERS = {
    "UPSTREAM_NET_KEY": "replace-with-the-wisphub-api-key",
    "UPSTREAM_NET_HOST": "https://isp.example.com",
    "JWT_SECRET_KEY": "CHANGE-ME-to-32+-random-bytes",
    "API_USERNAME": "replace-with-the-bot-username",
    "API_PASSWORD_HASH": "$2b$12$replace.with.the.output.of.isp-gateway.hash-password.xx",
}


def split_list(value: Any) -> Any:
    """Accept a JSON list or a comma-separated string for list settings."""
    if isinstance(value, str):
        text = value.strip()
        # `[fd00::5]:26379,...` (a v6 host:port first) is a comma-separated list, not JSON.
        if text.startswith("[") and not re.match(r"\[[0-9A-Fa-f:.%]+\]:", text):
            try:
                return json.loads(text)
            except ValueError:
                raise ValueError('not a JSON list; write a,b or ["a","b"]') from None
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


def host_port(text: str) -> tuple[str, int]:
    """`host:port` or `[v6 address]:port` as (host, port), or a ValueError naming the entry
    (an address, never a secret)."""
    host, sep, port = text.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or (":" in host and not text.strip().startswith("[")):
        raise ValueError(f"{text.strip()!r} is not host:port (e.g. 10.0.0.5:26379)")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text.strip()!r}: the port must be a number from 1 to 65535")
    return host, int(port)


def not_a_placeholder(value: Any, info: ValidationInfo) -> Any:
    # Before the other checks, so a copied .env.example names each of them as such.
    raw = value.get_secret_value() if isinstance(value, SecretStr) else value
    name = info.field_name
    if isinstance(raw, str) and name is not None and raw.strip() == PLACEHOLDERS[name]:
        raise ValueError("still the .env.example placeholder; set the real value")
    return value


def blank_is_unset(value: Any) -> Any:
    # `REDIS_URL=` in a .env or compose file means "not configured", not an empty URL
    # (`API_KEYS_FILE=` means keys are off, not a file named "").
    if isinstance(value, str) and not value.strip():
        return None
    return value


def key_not_blank(value: SecretStr) -> SecretStr:
    if not value.get_secret_value().strip():
        raise ValueError("must not be empty")
    return value


def http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError("must start with http:// or https://")
    parts = urlsplit(value)
    if not parts.hostname:
        raise ValueError("must name a host, e.g. https://api.wisphub.net")
    if "@" in parts.netloc:
        # httpx turns a user and password in the address into Basic auth, which replaces the
        # Api-Key header on every call (each answered 401); and the address is printed and
        # logged at start-up. Never echoed here.
        raise ValueError(
            "must not hold a user or password (the backend's key is UPSTREAM_NET_KEY), "
            "e.g. https://api.wisphub.net"
        )
    if parts.query or parts.fragment or value.rstrip("/").endswith(("?", "#")):
        # Every call's path would be added after it: https://x/?a=1/api/clientes/.
        raise ValueError("must be a base address without ?query or #fragment")
    if parts.path.rstrip("/").lower().endswith("/api"):
        # Every call adds `api/...` itself: `https://x/api` would ask `/api/api/clientes/`,
        # which answers 404 (an HTML page), and the service could never read a list.
        raise ValueError(
            "must be the backend's base address without /api (the service adds api/... "
            "itself), e.g. https://api.wisphub.net"
        )
    return value.rstrip("/")


def hmac_only(value: str) -> str:
    # One shared secret signs and verifies, so only the HMAC family makes sense here;
    # 'none' must never be accepted.
    if value not in {"HS256", "HS384", "HS512"}:
        raise ValueError("must be one of HS256, HS384, HS512")
    return value


def long_secret(value: SecretStr) -> SecretStr:
    if len(value.get_secret_value().encode()) < MIN_SECRET_BYTES:
        raise ValueError(f"must be at least {MIN_SECRET_BYTES} bytes long")
    if len(set(value.get_secret_value())) < MIN_SECRET_DISTINCT_CHARS:
        raise ValueError(
            f"must hold at least {MIN_SECRET_DISTINCT_CHARS} different characters "
            '(generate one: python -c "import secrets; print(secrets.token_urlsafe(48))")'
        )
    return value


def bcrypt_hash(value: SecretStr) -> SecretStr:
    if not value.get_secret_value().startswith(("$2a$", "$2b$", "$2y$")):
        raise ValueError("must be a bcrypt hash (see `isp-gateway hash-password`)")
    return value


def not_empty_states(value: list[int]) -> list[int]:
    if not value:
        raise ValueError("must list at least one state")
    return value


def delays(value: list[float]) -> list[float]:
    if not value or any(delay <= 0 for delay in value):
        raise ValueError("must list at least one delay, each above 0 seconds")
    return value


def origins(value: list[str]) -> list[str]:
    # A browser's Origin never ends in "/": "https://bot.example.com/" would never match.
    return [origin.rstrip("/") if origin != "*" else origin for origin in value]


def iso_dates(value: list[str]) -> list[str]:
    for item in value:
        date.fromisoformat(item)  # raises ValueError with a clear text
    return value


def known_zone(value: str) -> str:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {value!r}") from exc
    return value


def known_country(value: str) -> str:
    import holidays

    if value.upper() not in holidays.list_supported_countries():
        raise ValueError(f"no holiday calendar for country {value!r}")
    return value.upper()


def redis_scheme(value: SecretStr | None) -> SecretStr | None:
    # Checked here so a typo stops start-up with a message, not a traceback; the URL may
    # hold a password, so it is never echoed.
    if value is not None and not value.get_secret_value().startswith(
        ("redis://", "rediss://", "unix://")
    ):
        raise ValueError("must start with redis://, rediss:// or unix://")
    if value is not None:
        redis_url_readable(value.get_secret_value())
    return value


def redis_url_readable(url: str) -> None:
    """What redis-py reads without connecting: a port that is no number (`redis://:pw` with
    the `@` forgotten makes the password the port), an IPv6 address unclosed, a ?option of
    the wrong type. check-config passed them, `--probe` answered a traceback and `serve`
    'cannot reach'. The reason is not echoed: it can quote the password."""
    from redis.asyncio.connection import parse_url

    try:
        parse_url(url)
        parts = urlsplit(url)
    except ValueError:
        raise ValueError(
            "is not a URL redis can read (its port, address or ?options), "
            "e.g. redis://:PASSWORD@10.0.0.5:6379/0"
        ) from None
    database = parts.path.strip("/")
    if parts.scheme != "unix" and database and not database.isdigit():
        # redis-py ignores a database that is no number and uses 0.
        raise ValueError("the database after the address must be a number, e.g. /0")


def sentinel_addresses(value: Any) -> Any:
    if isinstance(value, str) and value.strip() and not split_list(value):
        raise ValueError("must list at least one host:port, e.g. 10.0.0.5:26379")
    parts = split_list(value)
    if not isinstance(parts, list):
        return parts
    return [host_port(part) if isinstance(part, str) else part for part in parts]


def distinct_sentinels(value: list[tuple[str, int]]) -> list[tuple[str, int]]:
    if len(set(value)) != len(value):
        raise ValueError("names a sentinel twice")
    return value


def master_name(value: str | None) -> str | None:
    if value is not None and (value != value.strip() or " " in value):
        raise ValueError("must be the master's name in the sentinels, without spaces")
    return value


def trusted_proxies(value: str) -> str:
    """uvicorn's reader of FORWARDED_ALLOW_IPS keeps an entry it cannot parse as a literal
    that no TCP peer ever matches: a typo there left X-Forwarded-For untrusted without a word,
    and behind nginx every caller was counted under nginx's address."""
    for entry in (part.strip() for part in value.split(",")):
        if entry in ("", "*"):
            continue
        try:
            if "/" in entry:
                ipaddress.ip_network(entry)
            else:
                ipaddress.ip_address(entry)
        except ValueError:
            raise ValueError(
                f"{entry!r} is no IP address or network: list addresses or networks with "
                "commas (10.0.0.7,10.0.0.0/24), or * for any"
            ) from None
    return value


def log_level(value: str) -> str:
    level = value.strip().upper()
    if level not in {"CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG"}:
        raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
    return level


def across(settings: Settings) -> None:
    """The rules that involve several settings (a ValueError naming each setting)."""
    # The same rule as MIN_SECRET_BYTES for the longer HMACs (RFC 7518 3.2): PyJWT warns on
    # every token otherwise.
    needed = {"HS384": 48, "HS512": 64}.get(settings.JWT_ALGORITHM, MIN_SECRET_BYTES)
    if len(settings.JWT_SECRET_KEY.get_secret_value().encode()) < needed:
        raise ValueError(
            f"JWT_SECRET_KEY: must be at least {needed} bytes long for {settings.JWT_ALGORITHM}"
        )
    _one_redis(settings)
    if settings.TICKET_SUBJECTS_FILE is not None and not settings.TICKET_SUBJECTS_FILE.is_file():
        raise ValueError(f"TICKET_SUBJECTS_FILE: no such file {settings.TICKET_SUBJECTS_FILE}")


def _one_redis(settings: Settings) -> None:
    # One way to the shared store: a URL, or a master found through Sentinel. A setting that
    # only the other way reads is refused rather than silently ignored.
    if settings.REDIS_SENTINELS and settings.REDIS_URL is not None:
        raise ValueError(
            "REDIS_URL and REDIS_SENTINELS: set one of them, not both (REDIS_URL names one "
            "Redis; REDIS_SENTINELS finds the master of a replicated one)"
        )
    if settings.REDIS_SENTINELS and settings.REDIS_SENTINEL_MASTER is None:
        raise ValueError(
            "REDIS_SENTINEL_MASTER is required with REDIS_SENTINELS (the name the "
            "sentinels monitor the master under, e.g. mymaster)"
        )
    if not settings.REDIS_SENTINELS:
        stray = [
            name
            for name in ("REDIS_SENTINEL_MASTER", "REDIS_PASSWORD", "REDIS_SENTINEL_PASSWORD")
            if getattr(settings, name) is not None
        ]
        if stray:
            raise ValueError(
                f"{', '.join(stray)}: only read with REDIS_SENTINELS (a REDIS_URL carries "
                "its own password)"
            )
