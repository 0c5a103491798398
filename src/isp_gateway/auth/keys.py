"""API keys (CALLERS.md 3): scopes, the key file, and the ring a running service looks keys
up in.

A key is `igw_` + 43 URL-safe characters (`secrets.token_urlsafe(32)`), shown once by
`isp-gateway keys create` and stored only as its SHA-256 in the JSON file `API_KEYS_FILE`:

    {"version": 1, "keys": [{"name": "whatsapp-bot", "sha256": "<64 hex>",
      "scopes": ["clients:read", "clients:verify"], "rate_per_minute": 120,
      "created_at": "2026-11-24T20:00:00Z"}]}

`KeyRing` looks a presented key up by its digest and re-reads the file when it changes (its
mtime, ctime, size or inode; checked at most once a second, from the request path), so a new
or revoked key applies on every worker within about a second, with no restart. A file that
cannot be read or parsed (its mode, its owner, broken JSON, a directory in its place) is an
error, never "no keys" (CALLERS.md 6): the ring keeps the last good keys, logs one ERROR per
change of the file, by file name only, and says `unreadable` (`status`, /ready's
`checks.keys`); `isp-gateway serve` and `check-config` refuse to start on it
(`check_key_file`). A file that does not exist yet holds no keys.

Writers (`isp-gateway keys create|revoke`) hold `locked_key_file` (an exclusive `flock` on
`<file>.lock` beside it) around their read-modify-write, and `write_key_entries` replaces
the file through a temporary file, fsync and an atomic rename, keeping its mode and, where
allowed, its owner: concurrent commands never lose a key or bring a revoked one back.

Wiring (the auth dependency): `presented_key(request.headers)` tells a key from a JWT; then
`ring.lookup(key)` gives the `ApiKey` or None (401, like a bad JWT); `require_scope(api_key.
scopes, CLIENTS_READ)` raises 403 `insufficient_scope`; `await enforce_key_rate(store,
api_key)` raises 429 `rate_limited` past the key's own `rate_per_minute`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

# The scopes and the key file are this module's API too: what a credential may do
# (auth/scopes.py) and how the keys are kept (auth/keyfile.py).
from isp_gateway.auth.keyfile import (
    FILE_VERSION as FILE_VERSION,
)
from isp_gateway.auth.keyfile import (
    KEY_PATTERN as KEY_PATTERN,
)
from isp_gateway.auth.keyfile import (
    KEY_PREFIX as KEY_PREFIX,
)
from isp_gateway.auth.keyfile import (
    LOCK_WAIT_SECONDS as LOCK_WAIT_SECONDS,
)
from isp_gateway.auth.keyfile import (
    NAME_PATTERN as NAME_PATTERN,
)
from isp_gateway.auth.keyfile import (
    ApiKey as ApiKey,
)
from isp_gateway.auth.keyfile import (
    KeyFileError as KeyFileError,
)
from isp_gateway.auth.keyfile import (
    KeyFileLocked as KeyFileLocked,
)
from isp_gateway.auth.keyfile import (
    check_key_file as check_key_file,
)
from isp_gateway.auth.keyfile import (
    generate_key as generate_key,
)
from isp_gateway.auth.keyfile import (
    key_digest as key_digest,
)
from isp_gateway.auth.keyfile import (
    lock_path as lock_path,
)
from isp_gateway.auth.keyfile import (
    locked_key_file as locked_key_file,
)
from isp_gateway.auth.keyfile import (
    new_entry as new_entry,
)
from isp_gateway.auth.keyfile import (
    parse_key_file as parse_key_file,
)
from isp_gateway.auth.keyfile import (
    read_key_entries as read_key_entries,
)
from isp_gateway.auth.keyfile import read_text
from isp_gateway.auth.keyfile import (
    write_key_entries as write_key_entries,
)
from isp_gateway.auth.scopes import (
    ACCOUNTS_READ as ACCOUNTS_READ,
)
from isp_gateway.auth.scopes import (
    ALL_SCOPES as ALL_SCOPES,
)
from isp_gateway.auth.scopes import (
    AUDIT_READ as AUDIT_READ,
)
from isp_gateway.auth.scopes import (
    CLIENTS_READ as CLIENTS_READ,
)
from isp_gateway.auth.scopes import (
    CLIENTS_VERIFY as CLIENTS_VERIFY,
)
from isp_gateway.auth.scopes import (
    CLIENTS_WRITE as CLIENTS_WRITE,
)
from isp_gateway.auth.scopes import (
    JWT_SCOPES as JWT_SCOPES,
)
from isp_gateway.auth.scopes import (
    KNOWN_SCOPES as KNOWN_SCOPES,
)
from isp_gateway.auth.scopes import (
    NETWORK_PING as NETWORK_PING,
)
from isp_gateway.auth.scopes import (
    OUTAGES_READ as OUTAGES_READ,
)
from isp_gateway.auth.scopes import (
    PAYMENTS_PROMISE as PAYMENTS_PROMISE,
)
from isp_gateway.auth.scopes import (
    PAYMENTS_REPORT as PAYMENTS_REPORT,
)
from isp_gateway.auth.scopes import (
    PLANS_READ as PLANS_READ,
)
from isp_gateway.auth.scopes import (
    SCOPES as SCOPES,
)
from isp_gateway.auth.scopes import (
    TICKETS_READ as TICKETS_READ,
)
from isp_gateway.auth.scopes import (
    TICKETS_WRITE as TICKETS_WRITE,
)
from isp_gateway.auth.scopes import (
    InsufficientScope as InsufficientScope,
)
from isp_gateway.auth.scopes import (
    has_scope as has_scope,
)
from isp_gateway.auth.scopes import (
    require_scope as require_scope,
)
from isp_gateway.kit import jsonfile
from isp_gateway.kit.actions import Action
from isp_gateway.kit.errors import Locked
from isp_gateway.store import Store

log = logging.getLogger("isp_gateway")

# How often the request path may stat the file; a change shows within this (and 5 s).
CHECK_INTERVAL_SECONDS = 1.0
# What `KeyRing.status` says (/ready's `checks.keys`).
KEYS_OK = "ok"
KEYS_UNREADABLE = "unreadable"


def presented_key(headers: Mapping[str, str] | Iterable[tuple[bytes, bytes]]) -> str | None:
    """The API key a request presents, or None when it presents none (a JWT, nothing).

    `X-API-Key: <value>` is always meant as a key (a malformed one fails the lookup, 401);
    `Authorization: Bearer igw_...` is a key, any other Bearer value is left to the JWT check.
    X-API-Key wins when both are sent. Takes Starlette's `Headers` (or any case-insensitive
    mapping) or an ASGI scope's raw header list."""
    if isinstance(headers, Mapping):
        explicit = headers.get("x-api-key")
        authorization = headers.get("authorization")
    else:
        explicit = authorization = None
        for name, value in headers:
            if name == b"x-api-key" and explicit is None:
                explicit = value.decode("latin-1")
            elif name == b"authorization" and authorization is None:
                authorization = value.decode("latin-1")
    if explicit is not None:
        return explicit.strip()
    if authorization:
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() == "bearer" and token.startswith(KEY_PREFIX):
            return token
    return None


class KeyRing:
    """The keys of API_KEYS_FILE, kept current with the file.

    `lookup` is the request path: a cached hit is one dict access; a miss hashes the key
    once. Every change of the file (seen by a stat at most once per `check_interval`)
    empties the cache, so a revoked key stops at the next check."""

    def __init__(
        self,
        path: Path | None,
        *,
        check_interval: float = CHECK_INTERVAL_SECONDS,
        cache_size: int = 1024,
    ) -> None:
        self.path = path
        self._cache_max = cache_size
        self._keys: dict[str, ApiKey] = {}
        # Verified keys of this process's requests, so a bot's next request is not hashed
        # again. In memory only, bounded, emptied on every change of the file.
        self._cache: dict[str, ApiKey] = {}
        self._watch = jsonfile.Watch(path, check_interval) if path is not None else None
        # Whether the file as it is now was read (or does not exist): else the ring serves
        # the last good keys and says so (`status`).
        self._readable = True
        if path is not None:
            self.refresh()

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def status(self) -> str:
        """`ok`, or `unreadable` while the file as it is now cannot be read or parsed (the
        last good keys still serve); /ready's `checks.keys`. Keys off: `ok`."""
        if self.path is None:
            return KEYS_OK
        self._check()
        return KEYS_OK if self._readable else KEYS_UNREADABLE

    def names(self) -> list[str]:
        if self.path is None:
            return []
        self._check()
        return sorted(key.name for key in self._keys.values())

    def lookup(self, presented: str) -> ApiKey | None:
        """The key's ApiKey, or None when it is not a current key (unknown, revoked,
        malformed, or keys are off)."""
        if self.path is None:
            return None
        self._check()
        hit = self._cache.get(presented)
        if hit is not None:
            return hit
        if not KEY_PATTERN.fullmatch(presented):
            return None
        found = self._keys.get(key_digest(presented))
        if found is not None:
            if len(self._cache) >= self._cache_max:
                self._cache.clear()  # crude but bounded, as TokenCache
            self._cache[presented] = found
        return found

    def _check(self) -> None:
        now = time.monotonic()
        if self._watch is not None and self._watch.due(now):
            self.refresh(now)

    def refresh(self, now: float | None = None) -> None:
        """Stat the file and re-read it when it changed since the last look."""
        assert self.path is not None and self._watch is not None
        looked = self._watch.look(now)
        if looked is None:
            return
        if looked.absent:
            self._install({})
            return
        try:
            if looked.error is not None:
                raise KeyFileError(f"{self.path}: cannot be read (errno {looked.error.errno})")
            text = read_text(self.path)
            if text is None:  # removed between the stat and the read
                self._install({})
                return
            keys = parse_key_file(self.path, text)
        except KeyFileError as exc:
            # Once per change of the file: the watch remembers what it looked at.
            self._readable = False
            log.error("API_KEYS_FILE %s; keeping the %d keys read before", exc, len(self._keys))
            return
        self._install(keys)

    def _install(self, keys: dict[str, ApiKey]) -> None:
        self._keys = keys
        self._cache = {}
        self._readable = True


async def enforce_key_rate(store: Store, key: ApiKey, *, now: float | None = None) -> None:
    """Count one request of `key`; past its `rate_per_minute` within the current minute,
    429 `rate_limited` with Retry-After (the rest of the minute). Counted in the store, per
    fixed minute like the service's own limits, so every worker shares one count."""
    if key.rate_per_minute is None:
        return
    moment = time.time() if now is None else now
    window = int(moment // 60)
    count = await store.incr(f"ratelimit:key:{key.name}:{window}", 1, ttl=65)
    if count > key.rate_per_minute:
        raise Locked(
            action=Action.RATE_LIMITED,
            variant="key",
            retry_after=max(1, int((window + 1) * 60 - moment)),
        )
