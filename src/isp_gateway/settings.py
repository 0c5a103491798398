"""The service's settings: one class, read from the environment and `.env`.

Names follow the specification (sections 5 and 8) and DECISIONS.md exactly. Nothing is
instantiated at import time; `load_settings()` builds an instance and turns a validation
failure into one short message that names every offending variable.
"""

from __future__ import annotations

import json
from difflib import get_close_matches
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_CORS_ORIGINS = [
    "http://localhost",
    "http://localhost:3000",
    "http://localhost:8080",
    "http://localhost:8081",
    "http://localhost:8082",
]

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

# Variables the command line reads besides the settings: a `.env` may hold them too.
CLI_VARIABLES = frozenset({"SIMULATOR_API_KEY", "PROMETHEUS_MULTIPROC_DIR"})


def _split_list(value: Any) -> Any:
    """Accept a JSON list or a comma-separated string for list settings."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                return json.loads(text)
            except ValueError:
                raise ValueError('not a JSON list; write a,b or ["a","b"]') from None
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


def _host_port(text: str) -> tuple[str, int]:
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


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        case_sensitive=True,
        extra="ignore",
    )

    # Upstream (spec 5.2)
    UPSTREAM_NET_KEY: SecretStr
    UPSTREAM_NET_HOST: str = Field(min_length=1)
    UPSTREAM_TIMEOUT_SECONDS: float = Field(default=10.0, gt=0, le=60)
    UPSTREAM_PAGE_SIZE: int = Field(default=500, ge=1, le=5000)
    UPSTREAM_PARALLEL_PAGES: int = Field(default=4, ge=1, le=32)
    # A background page that failed transiently waits this long before it is asked again,
    # twice as long at each next attempt (at most 30 s); the load gives up after 4 attempts.
    UPSTREAM_PAGE_RETRY_SECONDS: float = Field(default=2.0, gt=0, le=30)
    UPSTREAM_RATE_PER_MINUTE: int = Field(default=100, ge=1)
    UPSTREAM_RATE_PER_HOUR: int = Field(default=1000, ge=1)
    # Share of each budget window kept for interactive calls (tickets, pings, lookup
    # misses, confirmations); whole-list refreshes are planned within the rest.
    UPSTREAM_INTERACTIVE_RESERVE: float = Field(default=0.3, ge=0, lt=1)
    # The fair share (CALLERS.md 6): the most of the interactive minute one caller may take
    # while another caller spends, and of its caller's share one end user may take while
    # another end user of that caller spends (1 = no share).
    UPSTREAM_CALLER_SHARE: float = Field(default=0.5, gt=0, le=1)
    # The last part of the minute a caller or end user past its share never takes, even
    # alone: kept for those under their share (a lone bot may use 90 of 100 calls a minute).
    UPSTREAM_SHARE_RESERVE: float = Field(default=0.1, ge=0, lt=1)

    # Client auth (spec 5.1)
    JWT_SECRET_KEY: SecretStr
    JWT_ALGORITHM: str = "HS256"
    JWT_ACCESS_TOKEN_EXPIRE_MINUTES: int = Field(default=60, ge=1)
    API_USERNAME: str = Field(min_length=1)
    API_PASSWORD_HASH: SecretStr
    LOGIN_MAX_FAILURES: int = Field(default=5, ge=1)
    LOGIN_LOCKOUT_SECONDS: int = Field(default=900, ge=1)
    # CALLERS.md 2: failures of one username from every address lock it for the addresses
    # that have not logged in as that user within LOGIN_KNOWN_ADDRESS_SECONDS.
    LOGIN_USERNAME_MAX_FAILURES: int = Field(default=50, ge=1)
    LOGIN_KNOWN_ADDRESS_SECONDS: int = Field(default=86400, ge=60)
    # CALLERS.md 3: API keys (`isp-gateway keys create`), a JSON file of names, scopes and
    # SHA-256 digests, re-read within seconds of a change; unset = keys off.
    API_KEYS_FILE: Path | None = None
    # CALLERS.md 4: the audit keeps the newest this many events (a capped stream with Redis).
    AUDIT_MAX_EVENTS: int = Field(default=100_000, ge=100)
    # Off: audit events are neither stored nor logged (for measuring what the audit costs).
    AUDIT_ENABLED: bool = True

    # Tickets (spec 8)
    MAX_ACTIVE_TICKETS_PER_ZONE: int = Field(default=3, ge=1)
    ACTIVE_TICKET_STATES: Annotated[list[int], NoDecode] = Field(default_factory=lambda: [1])
    MAX_TICKET_RESOLUTION_DAYS: int = Field(default=3, ge=0, le=365)
    TICKET_SUBJECTS_FILE: Path | None = None
    TIMEZONE: str = "America/Bogota"
    HOLIDAYS_COUNTRY: str = "CO"
    EXTRA_HOLIDAYS: Annotated[list[str], NoDecode] = Field(default_factory=list)
    IDEMPOTENCY_TTL_SECONDS: int = Field(default=86400, ge=60)
    # Beyond the spec (BEYOND.md): one open ticket per service and subject; the lifetime of
    # the cached sweep of active tickets (client tickets, diagnose).
    DUPLICATE_TICKET_GUARD: bool = True
    ACTIVE_TICKETS_CACHE_SECONDS: int = Field(default=60, ge=1)
    # CALLERS.md 2: zone status and ticket creation share one sweep of active tickets at most
    # this old (single-flight across workers).
    ZONE_SWEEP_FRESH_SECONDS: float = Field(default=5.0, gt=0, le=60)

    # Clients
    ACTIVE_CLIENT_STATES: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["Activo"])
    PHONE_COUNTRY_CODE: str = Field(default="57", pattern=r"^\d{1,4}$")
    PHONE_NATIONAL_LENGTH: int = Field(default=10, ge=6, le=15)
    VERIFY_MAX_FAILURES: int = Field(default=5, ge=1)
    VERIFY_LOCKOUT_SECONDS: int = Field(default=900, ge=1)
    # CALLERS.md 2: failures of one end user on every service, and of every end user on one
    # service, before a lock (same window).
    VERIFY_END_USER_MAX_FAILURES: int = Field(default=20, ge=1)
    VERIFY_SERVICE_MAX_FAILURES: int = Field(default=20, ge=1)
    # CALLERS.md 6: identity failures of one caller (API key or JWT subject), whatever
    # X-End-User-Id it sends, before every identity call of it is locked (same window); and
    # the distinct services it may resolve in any hour (each a slot read per resolve).
    CALLER_IDENTITY_FAILURES: int = Field(default=100, ge=1)
    CALLER_RESOLVES_PER_HOUR: int = Field(default=60, ge=1, le=1000)
    # CALLERS.md 6: `spec` answers verify and resolve as the spec does (a failed verify shows
    # the record's address, plan and price in `debug`; 3 of 4 fields, plan name and price
    # counted apart; resolve returns the record). `strict`, for any bot strangers can talk
    # to: no debug, the plan counts as one fact beside the name and the address, resolve
    # answers ids and a verification_id. strict and REQUIRE_VERIFICATION imply each other.
    IDENTITY_POLICY: Literal["spec", "strict"] = "spec"
    # A lookup that misses a complete index asks the upstream about that value at most once
    # per this many seconds, across workers (CALLERS.md 2).
    MISS_RECHECK_SECONDS: int = Field(default=300, ge=0)

    # Caching
    CLIENT_CACHE_SECONDS: int = Field(default=300, ge=1)
    PLAN_CACHE_SECONDS: int = Field(default=900, ge=1)
    STALE_IF_ERROR_SECONDS: int = Field(default=3600, ge=0)
    NEGATIVE_CACHE_SECONDS: int = Field(default=60, ge=0)
    # Accounts (BEYOND.md): a cached suspended/cancelled state older than this is confirmed
    # with a fresh read; pending-invoice list and payment-method lifetimes.
    STATE_FRESH_SECONDS: int = Field(default=120, ge=0)
    INVOICE_CACHE_SECONDS: int = Field(default=300, ge=1)
    PAYMENT_METHODS_CACHE_SECONDS: int = Field(default=3600, ge=1)

    # Network diagnostics
    PING_TASK_TTL_SECONDS: int = Field(default=3600, ge=60)
    PING_POLL_INTERVAL_SECONDS: float = Field(default=2.0, ge=0.1)
    PING_COALESCE_SECONDS: float = Field(default=10.0, ge=0)
    # Diagnose (BEYOND.md): lifetime of the router catalogue whose general-outage flags it
    # reports; a flag is never older than this.
    OUTAGE_CACHE_SECONDS: int = Field(default=60, ge=1)
    # Outage notices (docs/outages.md): the subscriptions file `isp-gateway webhooks add`
    # writes (unset = notices off); http:// receivers on loopback or private addresses; the
    # delays after each failed delivery (the last one repeated) until one is dropped; and
    # tickets for a service under an active outage: `allow` (the spec) or `hold` (409).
    WEBHOOKS_FILE: Path | None = None
    WEBHOOKS_ALLOW_HTTP: bool = False
    WEBHOOKS_RETRY_SECONDS: Annotated[list[float], NoDecode] = Field(
        default_factory=lambda: [5.0, 30.0, 120.0, 600.0, 3600.0]
    )
    WEBHOOKS_GIVE_UP_SECONDS: float = Field(default=86400.0, gt=0)
    OUTAGE_TICKETS: Literal["allow", "hold"] = "allow"

    # HTTP surface
    CORS_ORIGINS: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_CORS_ORIGINS)
    )
    RATE_LIMIT_PER_MINUTE: int = Field(default=0, ge=0)  # per address; 0 = off (DECISIONS.md)
    RATE_LIMIT_PER_SUBJECT_PER_MINUTE: int = Field(default=0, ge=0)  # per token subject
    REDIS_URL: SecretStr | None = None
    # Or a master watched by Redis Sentinel (instead of REDIS_URL): the sentinels' host:port
    # list, the master's name in them, the master's password and the sentinels' own.
    REDIS_SENTINELS: Annotated[list[tuple[str, int]], NoDecode] = Field(default_factory=list)
    REDIS_SENTINEL_MASTER: str | None = None
    REDIS_PASSWORD: SecretStr | None = None
    REDIS_SENTINEL_PASSWORD: SecretStr | None = None
    # Every store command answers within this many seconds, or the store counts as away (503).
    REDIS_TIMEOUT_SECONDS: float = Field(default=2.0, gt=0, le=30)
    LOG_LEVEL: str = "INFO"
    # The language of every `message` the API answers and of the MCP tools' sentences
    # (kit/messages.py); the texts the spec quotes stay as quoted in both.
    MESSAGES_LANGUAGE: Literal["es", "en"] = "es"
    # Request bodies: the largest accepted, in bytes (413 payload_too_large above it).
    MAX_BODY_BYTES: int = Field(default=65536, ge=1024)
    # Operating endpoints (BEYOND.md): GET /metrics and the request metrics; off = no route.
    METRICS_ENABLED: bool = True
    # Issue 21: /metrics on its own port (every worker's samples, as on the API port), and
    # then no longer on the API port; unset = /metrics on the API port. The address it binds.
    METRICS_PORT: int | None = Field(default=None, ge=1, le=65535)
    METRICS_HOST: str = Field(default="127.0.0.1", min_length=1)
    # Serving and logs: where `isp-gateway serve` listens when --host/--port are not given
    # (a systemd unit's environment file names the host: issue 28), the server it runs, the
    # access log, the log format.
    ISP_GATEWAY_HOST: str = Field(default="127.0.0.1", min_length=1)
    ISP_GATEWAY_PORT: int = Field(default=8000, ge=1, le=65535)
    SERVER: Literal["granian", "uvicorn"] = "granian"
    ACCESS_LOG: bool = True
    LOG_FORMAT: Literal["text", "json"] = "text"
    # `serve --proxy-headers` trusts X-Forwarded-For / -Proto from these addresses.
    FORWARDED_ALLOW_IPS: str = "127.0.0.1"

    # AI agents (CALLERS.md 5): the MCP server at /mcp; how long a verification_id stays
    # valid; the technician of an agent's ticket when the client record names none.
    MCP_ENABLED: bool = True
    VERIFICATION_TTL_SECONDS: int = Field(default=900, ge=1)
    # CALLERS.md 5, REST's opt-in guard: account, a client's tickets, diagnose, PUT and ticket
    # creation need X-Verification-Id naming a verification of that service by this caller
    # and end user (issued by a successful verify, which then adds `data.verification_id`).
    REQUIRE_VERIFICATION: bool = False
    DEFAULT_TECHNICIAN_ID: int | None = Field(default=None, ge=1)

    # Money (MONEY.md): a payment promise's date is at most PROMISE_MAX_DAYS ahead; a broken
    # promise bars new ones for PROMISE_COOLDOWN_DAYS from its date; at most
    # PROMISES_PER_90_DAYS promises per service in any 90 days; a payment report's receipt
    # is at most RECEIPT_MAX_BYTES (413 above it).
    PROMISE_MAX_DAYS: int = Field(default=5, ge=1, le=60)
    PROMISE_COOLDOWN_DAYS: int = Field(default=30, ge=0, le=365)
    PROMISES_PER_90_DAYS: int = Field(default=2, ge=1, le=90)
    RECEIPT_MAX_BYTES: int = Field(default=5 * 1024 * 1024, ge=1024, le=50 * 1024 * 1024)

    @field_validator(
        "ACTIVE_TICKET_STATES",
        "EXTRA_HOLIDAYS",
        "ACTIVE_CLIENT_STATES",
        "CORS_ORIGINS",
        "WEBHOOKS_RETRY_SECONDS",
        mode="before",
    )
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _split_list(value)

    @field_validator("ACTIVE_TICKET_STATES")
    @classmethod
    def _states_not_empty(cls, value: list[int]) -> list[int]:
        if not value:
            raise ValueError("must list at least one state")
        return value

    @field_validator("WEBHOOKS_RETRY_SECONDS")
    @classmethod
    def _delays(cls, value: list[float]) -> list[float]:
        if not value or any(delay <= 0 for delay in value):
            raise ValueError("must list at least one delay, each above 0 seconds")
        return value

    @field_validator("CORS_ORIGINS")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        # A browser's Origin never ends in "/": "https://bot.example.com/" would never match.
        return [origin.rstrip("/") if origin != "*" else origin for origin in value]

    @field_validator("EXTRA_HOLIDAYS")
    @classmethod
    def _iso_dates(cls, value: list[str]) -> list[str]:
        from datetime import date

        for item in value:
            date.fromisoformat(item)  # raises ValueError with a clear text
        return value

    @field_validator("TIMEZONE")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value

    @field_validator("HOLIDAYS_COUNTRY")
    @classmethod
    def _known_country(cls, value: str) -> str:
        import holidays

        if value.upper() not in holidays.list_supported_countries():
            raise ValueError(f"no holiday calendar for country {value!r}")
        return value.upper()

    @field_validator("JWT_ALGORITHM")
    @classmethod
    def _hmac_only(cls, value: str) -> str:
        # One shared secret signs and verifies, so only the HMAC family makes sense here;
        # 'none' must never be accepted.
        if value not in {"HS256", "HS384", "HS512"}:
            raise ValueError("must be one of HS256, HS384, HS512")
        return value

    @field_validator(*PLACEHOLDERS, mode="before")
    @classmethod
    def _not_a_placeholder(cls, value: Any, info: ValidationInfo) -> Any:
        # Before the other checks, so a copied .env.example names each of them as such.
        raw = value.get_secret_value() if isinstance(value, SecretStr) else value
        name = info.field_name
        if isinstance(raw, str) and name is not None and raw.strip() == PLACEHOLDERS[name]:
            raise ValueError("still the .env.example placeholder; set the real value")
        return value

    @field_validator("JWT_SECRET_KEY")
    @classmethod
    def _long_secret(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value().encode()) < MIN_SECRET_BYTES:
            raise ValueError(f"must be at least {MIN_SECRET_BYTES} bytes long")
        if len(set(value.get_secret_value())) < MIN_SECRET_DISTINCT_CHARS:
            raise ValueError(
                f"must hold at least {MIN_SECRET_DISTINCT_CHARS} different characters "
                '(generate one: python -c "import secrets; print(secrets.token_urlsafe(48))")'
            )
        return value

    @field_validator("API_PASSWORD_HASH")
    @classmethod
    def _bcrypt_hash(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().startswith(("$2a$", "$2b$", "$2y$")):
            raise ValueError("must be a bcrypt hash (see `isp-gateway hash-password`)")
        return value

    @field_validator("UPSTREAM_NET_KEY")
    @classmethod
    def _key_not_blank(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("UPSTREAM_NET_HOST")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        parts = urlsplit(value)
        if not parts.hostname:
            raise ValueError("must name a host, e.g. https://api.wisphub.net")
        if parts.path.rstrip("/").lower().endswith("/api"):
            # Every call adds `api/...` itself: `https://x/api` would ask `/api/api/clientes/`,
            # which answers 404 (an HTML page), and the service could never read a list.
            raise ValueError(
                "must be the backend's base address without /api (the service adds api/... "
                "itself), e.g. https://api.wisphub.net"
            )
        return value.rstrip("/")

    @field_validator(
        "REDIS_URL",
        "REDIS_SENTINEL_MASTER",
        "REDIS_PASSWORD",
        "REDIS_SENTINEL_PASSWORD",
        "TICKET_SUBJECTS_FILE",
        "DEFAULT_TECHNICIAN_ID",
        "METRICS_PORT",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        # `REDIS_URL=` in a .env or compose file means "not configured", not an empty URL.
        if isinstance(value, str) and not value.strip():
            return None
        return value

    @field_validator("API_KEYS_FILE", "WEBHOOKS_FILE", mode="before")
    @classmethod
    def _blank_keys_file_is_unset(cls, value: Any) -> Any:
        # `API_KEYS_FILE=` means keys are off, not a file named "" (notices, the same).
        if isinstance(value, str) and not value.strip():
            return None
        return value

    @field_validator("REDIS_URL")
    @classmethod
    def _redis_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        # Checked here so a typo stops start-up with a message, not a traceback; the URL
        # may hold a password, so it is never echoed.
        if value is not None and not value.get_secret_value().startswith(
            ("redis://", "rediss://", "unix://")
        ):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return value

    @field_validator("REDIS_SENTINELS", mode="before")
    @classmethod
    def _sentinel_addresses(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip() and not _split_list(value):
            raise ValueError("must list at least one host:port, e.g. 10.0.0.5:26379")
        parts = _split_list(value)
        if not isinstance(parts, list):
            return parts
        return [_host_port(part) if isinstance(part, str) else part for part in parts]

    @field_validator("REDIS_SENTINELS")
    @classmethod
    def _distinct_sentinels(cls, value: list[tuple[str, int]]) -> list[tuple[str, int]]:
        if len(set(value)) != len(value):
            raise ValueError("names a sentinel twice")
        return value

    @field_validator("REDIS_SENTINEL_MASTER")
    @classmethod
    def _master_name(cls, value: str | None) -> str | None:
        if value is not None and (value != value.strip() or " " in value):
            raise ValueError("must be the master's name in the sentinels, without spaces")
        return value

    @field_validator("LOG_LEVEL")
    @classmethod
    def _log_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in {"CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG"}:
            raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        return level

    @model_validator(mode="after")
    def _secret_fits_algorithm(self) -> Settings:
        # The same rule as MIN_SECRET_BYTES for the longer HMACs (RFC 7518 3.2): PyJWT warns
        # on every token otherwise.
        needed = {"HS384": 48, "HS512": 64}.get(self.JWT_ALGORITHM, MIN_SECRET_BYTES)
        if len(self.JWT_SECRET_KEY.get_secret_value().encode()) < needed:
            raise ValueError(
                f"JWT_SECRET_KEY: must be at least {needed} bytes long for {self.JWT_ALGORITHM}"
            )
        return self

    @model_validator(mode="after")
    def _one_redis(self) -> Settings:
        # One way to the shared store: a URL, or a master found through Sentinel. A setting
        # that only the other way reads is refused rather than silently ignored.
        if self.REDIS_SENTINELS and self.REDIS_URL is not None:
            raise ValueError(
                "REDIS_URL and REDIS_SENTINELS: set one of them, not both (REDIS_URL names one "
                "Redis; REDIS_SENTINELS finds the master of a replicated one)"
            )
        if self.REDIS_SENTINELS and self.REDIS_SENTINEL_MASTER is None:
            raise ValueError(
                "REDIS_SENTINEL_MASTER is required with REDIS_SENTINELS (the name the "
                "sentinels monitor the master under, e.g. mymaster)"
            )
        if not self.REDIS_SENTINELS:
            stray = [
                name
                for name in ("REDIS_SENTINEL_MASTER", "REDIS_PASSWORD", "REDIS_SENTINEL_PASSWORD")
                if getattr(self, name) is not None
            ]
            if stray:
                raise ValueError(
                    f"{', '.join(stray)}: only read with REDIS_SENTINELS (a REDIS_URL "
                    "carries its own password)"
                )
        return self

    @model_validator(mode="after")
    def _strict_means_verified(self) -> Settings:
        """CALLERS.md 6: REQUIRE_VERIFICATION=true implies IDENTITY_POLICY=strict and strict
        implies it. Either one set (in .env.example both are written out, the other left at
        its default) turns both on: the safer reading always wins."""
        if self.REQUIRE_VERIFICATION or self.IDENTITY_POLICY == "strict":
            self.IDENTITY_POLICY = "strict"
            self.REQUIRE_VERIFICATION = True
        return self

    @model_validator(mode="after")
    def _subjects_file_exists(self) -> Settings:
        if self.TICKET_SUBJECTS_FILE is not None and not self.TICKET_SUBJECTS_FILE.is_file():
            raise ValueError(f"TICKET_SUBJECTS_FILE: no such file {self.TICKET_SUBJECTS_FILE}")
        return self

    @property
    def uses_redis(self) -> bool:
        """Whether the store is a shared Redis (REDIS_URL or REDIS_SENTINELS)."""
        return self.REDIS_URL is not None or bool(self.REDIS_SENTINELS)

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.TIMEZONE)


class ConfigurationError(Exception):
    """Raised with a one-paragraph, secret-free description of what is wrong."""


def describe_validation_error(exc: ValidationError) -> str:
    """Name every offending variable in one short message, never echoing values."""
    problems: list[str] = []
    for err in exc.errors():
        name = ".".join(str(part) for part in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            problems.append(f"{name} is required but not set")
        else:
            # Checks across fields name their variable in the message themselves.
            problems.append(f"{name}: {msg}" if name else msg)
    return "invalid configuration: " + "; ".join(problems)


def unknown_env_file_keys(env_file: str | Path | None = ".env") -> list[str]:
    """The keys of `env_file` that are no setting and no variable the CLI reads, each with
    a hint when a setting's name is close (`CORS_ORIGIN` → `CORS_ORIGINS`)."""
    if env_file is None or not Path(env_file).is_file():
        return []
    from dotenv import dotenv_values  # pydantic-settings' own .env reader

    known = set(Settings.model_fields) | CLI_VARIABLES
    problems = []
    for key in dotenv_values(env_file, encoding="utf-8"):
        if key in known:
            continue
        close = get_close_matches(key, sorted(known), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        problems.append(f"{key} in {Path(env_file).name} is no setting{hint}")
    return problems


def load_settings(**overrides: Any) -> Settings:
    """The settings, or ConfigurationError naming every problem: invalid values and, in
    `.env`, keys that are no setting (a typo would otherwise be silently ignored)."""
    problems = unknown_env_file_keys(overrides.get("_env_file", ".env"))
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        message = describe_validation_error(exc)
        raise ConfigurationError("; ".join([message, *problems])) from None
    if problems:
        raise ConfigurationError("invalid configuration: " + "; ".join(problems))
    return settings
