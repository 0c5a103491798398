"""The service's settings: one class, read from the environment and `.env`.

Names follow the specification (sections 5 and 8) and DECISIONS.md exactly. Nothing is
instantiated at import time; `load_settings()` builds an instance and turns a validation
failure into one short message that names every offending variable. The rules each setting
is checked against are in checks.py; reading them and naming the problems, in loading.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

from pydantic import AfterValidator, BeforeValidator, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from isp_gateway.settings import checks
from isp_gateway.settings.checks import PLACEHOLDERS as PLACEHOLDERS
from isp_gateway.settings.loading import CLI_VARIABLES as CLI_VARIABLES
from isp_gateway.settings.loading import ConfigurationError as ConfigurationError
from isp_gateway.settings.loading import describe_validation_error as describe_validation_error
from isp_gateway.settings.loading import load

DEFAULT_CORS_ORIGINS = [
    "http://localhost",
    "http://localhost:3000",
    "http://localhost:8080",
    "http://localhost:8081",
    "http://localhost:8082",
]
# A list setting takes `a,b` or a JSON list; a blank optional setting is unset.
Lists = BeforeValidator(checks.split_list)
Blank = BeforeValidator(checks.blank_is_unset)
# A required setting still holding its .env.example placeholder is refused, named.
Filled = BeforeValidator(checks.not_a_placeholder)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        case_sensitive=True,
        extra="ignore",
    )

    # Upstream (spec 5.2)
    UPSTREAM_NET_KEY: Annotated[SecretStr, Filled, AfterValidator(checks.key_not_blank)]
    UPSTREAM_NET_HOST: Annotated[str, Filled, AfterValidator(checks.http_url)] = Field(min_length=1)
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
    # The fair share (CALLERS.md 6): the most of the minute (and of the hour) one caller may take
    # while another caller spends, and of its caller's share one end user may take while
    # another end user of that caller spends (1 = no share).
    UPSTREAM_CALLER_SHARE: float = Field(default=0.5, gt=0, le=1)
    # The last part of each window a caller or end user past its share never takes, even
    # alone: kept for those under their share (a lone bot may use 90 of 100 calls a minute).
    UPSTREAM_SHARE_RESERVE: float = Field(default=0.1, ge=0, lt=1)

    # Client auth (spec 5.1)
    JWT_SECRET_KEY: Annotated[SecretStr, Filled, AfterValidator(checks.long_secret)]
    JWT_ALGORITHM: Annotated[str, AfterValidator(checks.hmac_only)] = "HS256"
    JWT_ACCESS_TOKEN_EXPIRE_MINUTES: int = Field(default=60, ge=1)
    API_USERNAME: Annotated[str, Filled] = Field(min_length=1)
    API_PASSWORD_HASH: Annotated[SecretStr, Filled, AfterValidator(checks.bcrypt_hash)]
    LOGIN_MAX_FAILURES: int = Field(default=5, ge=1)
    LOGIN_LOCKOUT_SECONDS: int = Field(default=900, ge=1)
    # CALLERS.md 2: failures of one username from every address lock it for the addresses
    # that have not logged in as that user within LOGIN_KNOWN_ADDRESS_SECONDS.
    LOGIN_USERNAME_MAX_FAILURES: int = Field(default=50, ge=1)
    LOGIN_KNOWN_ADDRESS_SECONDS: int = Field(default=86400, ge=60)
    # CALLERS.md 3: API keys (`isp-gateway keys create`), a JSON file of names, scopes and
    # SHA-256 digests, re-read within seconds of a change; unset = keys off.
    API_KEYS_FILE: Annotated[Path | None, BeforeValidator(checks.blank_is_unset)] = None
    # CALLERS.md 4: the audit keeps the newest this many events (a capped stream with Redis).
    AUDIT_MAX_EVENTS: int = Field(default=100_000, ge=100)
    # Off: audit events are neither stored nor logged (for measuring what the audit costs).
    AUDIT_ENABLED: bool = True

    # Tickets (spec 8)
    MAX_ACTIVE_TICKETS_PER_ZONE: int = Field(default=3, ge=1)
    ACTIVE_TICKET_STATES: Annotated[
        list[int], NoDecode, Lists, AfterValidator(checks.not_empty_states)
    ] = Field(default_factory=lambda: [1])
    MAX_TICKET_RESOLUTION_DAYS: int = Field(default=3, ge=0, le=365)
    TICKET_SUBJECTS_FILE: Annotated[Path | None, Blank] = None
    TIMEZONE: Annotated[str, AfterValidator(checks.known_zone)] = "America/Bogota"
    HOLIDAYS_COUNTRY: Annotated[str, AfterValidator(checks.known_country)] = "CO"
    EXTRA_HOLIDAYS: Annotated[list[str], NoDecode, Lists, AfterValidator(checks.iso_dates)] = Field(
        default_factory=list
    )
    IDEMPOTENCY_TTL_SECONDS: int = Field(default=86400, ge=60)
    # Beyond the spec (BEYOND.md): one open ticket per service and subject; the lifetime of
    # the cached sweep of active tickets (client tickets, diagnose).
    DUPLICATE_TICKET_GUARD: bool = True
    ACTIVE_TICKETS_CACHE_SECONDS: int = Field(default=60, ge=1)
    # CALLERS.md 2: zone status and ticket creation share one sweep of active tickets at most
    # this old (single-flight across workers).
    ZONE_SWEEP_FRESH_SECONDS: float = Field(default=5.0, gt=0, le=60)

    # Clients
    ACTIVE_CLIENT_STATES: Annotated[list[str], NoDecode, Lists] = Field(
        default_factory=lambda: ["Activo"]
    )
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
    WEBHOOKS_FILE: Annotated[Path | None, Blank] = None
    WEBHOOKS_ALLOW_HTTP: bool = False
    WEBHOOKS_RETRY_SECONDS: Annotated[
        list[float], NoDecode, Lists, AfterValidator(checks.delays)
    ] = Field(default_factory=lambda: [5.0, 30.0, 120.0, 600.0, 3600.0])
    WEBHOOKS_GIVE_UP_SECONDS: float = Field(default=86400.0, gt=0)
    OUTAGE_TICKETS: Literal["allow", "hold"] = "allow"

    # HTTP surface
    CORS_ORIGINS: Annotated[list[str], NoDecode, Lists, AfterValidator(checks.origins)] = Field(
        default_factory=lambda: list(DEFAULT_CORS_ORIGINS)
    )
    RATE_LIMIT_PER_MINUTE: int = Field(default=0, ge=0)  # per address; 0 = off (DECISIONS.md)
    RATE_LIMIT_PER_SUBJECT_PER_MINUTE: int = Field(default=0, ge=0)  # per token subject
    REDIS_URL: Annotated[SecretStr | None, Blank, AfterValidator(checks.redis_scheme)] = None
    # Or a master watched by Redis Sentinel (instead of REDIS_URL): the sentinels' host:port
    # list, the master's name in them, the master's password and the sentinels' own.
    REDIS_SENTINELS: Annotated[
        list[tuple[str, int]],
        NoDecode,
        BeforeValidator(checks.sentinel_addresses),
        AfterValidator(checks.distinct_sentinels),
    ] = Field(default_factory=list)
    REDIS_SENTINEL_MASTER: Annotated[str | None, Blank, AfterValidator(checks.master_name)] = None
    REDIS_PASSWORD: Annotated[SecretStr | None, Blank] = None
    REDIS_SENTINEL_PASSWORD: Annotated[SecretStr | None, Blank] = None
    # Every store command answers within this many seconds, or the store counts as away (503).
    REDIS_TIMEOUT_SECONDS: float = Field(default=2.0, gt=0, le=30)
    LOG_LEVEL: Annotated[str, AfterValidator(checks.log_level)] = "INFO"
    # The language of every `message` the API answers and of the MCP tools' sentences
    # (kit/messages.py); the texts the spec quotes stay as quoted in both.
    MESSAGES_LANGUAGE: Literal["es", "en"] = "es"
    # Request bodies: the largest accepted, in bytes (413 payload_too_large above it).
    MAX_BODY_BYTES: int = Field(default=65536, ge=1024)
    # Operating endpoints (BEYOND.md): GET /metrics and the request metrics; off = no route.
    METRICS_ENABLED: bool = True
    # Issue 21: /metrics on its own port (every worker's samples, as on the API port), and
    # then no longer on the API port; unset = /metrics on the API port. The address it binds.
    METRICS_PORT: Annotated[int | None, Blank] = Field(default=None, ge=1, le=65535)
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
    FORWARDED_ALLOW_IPS: Annotated[str, AfterValidator(checks.trusted_proxies)] = "127.0.0.1"

    # AI agents (CALLERS.md 5): the MCP server at /mcp; how long a verification_id stays
    # valid; the technician of an agent's ticket when the client record names none.
    MCP_ENABLED: bool = True
    VERIFICATION_TTL_SECONDS: int = Field(default=900, ge=1)
    # CALLERS.md 5, REST's opt-in guard: account, a client's tickets, diagnose, PUT and ticket
    # creation need X-Verification-Id naming a verification of that service by this caller
    # and end user (issued by a successful verify, which then adds `data.verification_id`).
    REQUIRE_VERIFICATION: bool = False
    DEFAULT_TECHNICIAN_ID: Annotated[int | None, Blank] = Field(default=None, ge=1)

    # Money (MONEY.md): a payment promise's date is at most PROMISE_MAX_DAYS ahead; a broken
    # promise bars new ones for PROMISE_COOLDOWN_DAYS from its date; at most
    # PROMISES_PER_90_DAYS promises per service in any 90 days; a payment report's receipt
    # is at most RECEIPT_MAX_BYTES (413 above it), and its whole body must arrive within
    # RECEIPT_UPLOAD_TIMEOUT_SECONDS of the route starting to read it (408 past it, the slot
    # it held freed): a stalled upload holds a receipt slot no longer than that.
    PROMISE_MAX_DAYS: int = Field(default=5, ge=1, le=60)
    PROMISE_COOLDOWN_DAYS: int = Field(default=30, ge=0, le=365)
    PROMISES_PER_90_DAYS: int = Field(default=2, ge=1, le=90)
    RECEIPT_MAX_BYTES: int = Field(default=5 * 1024 * 1024, ge=1024, le=50 * 1024 * 1024)
    RECEIPT_UPLOAD_TIMEOUT_SECONDS: float = Field(default=60.0, gt=0, le=600)

    @model_validator(mode="after")
    def _across(self) -> Settings:
        checks.across(self)
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

    @property
    def uses_redis(self) -> bool:
        """Whether the store is a shared Redis (REDIS_URL or REDIS_SENTINELS)."""
        return self.REDIS_URL is not None or bool(self.REDIS_SENTINELS)

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.TIMEZONE)


def unknown_env_file_keys(env_file: str | Path | None = ".env") -> list[str]:
    """The keys of `env_file` that are no setting (loading.py)."""
    from isp_gateway.settings.loading import unknown_env_file_keys as unknown

    return unknown(set(Settings.model_fields), env_file)


def load_settings(**overrides: Any) -> Settings:
    """The settings, or ConfigurationError naming every problem: invalid values and, in
    `.env`, keys that are no setting (a typo would otherwise be silently ignored)."""
    return load(Settings, **overrides)
