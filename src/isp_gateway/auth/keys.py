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

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from isp_gateway.kit.actions import Action
from isp_gateway.kit.errors import Locked, ServiceError
from isp_gateway.store import Store

log = logging.getLogger("isp_gateway")

# -- scopes ---------------------------------------------------------------------------------

CLIENTS_READ = "clients:read"  # list, search, lookups
CLIENTS_VERIFY = "clients:verify"  # verify, resolve
CLIENTS_WRITE = "clients:write"  # PUT
ACCOUNTS_READ = "accounts:read"  # account, payment methods
TICKETS_READ = "tickets:read"  # subjects, get ticket, zone status, a client's tickets
TICKETS_WRITE = "tickets:write"  # create
NETWORK_PING = "network:ping"  # pings, diagnose
PLANS_READ = "plans:read"
AUDIT_READ = "audit:read"
OUTAGES_READ = "outages:read"  # the general outages now active
PAYMENTS_PROMISE = "payments:promise"  # a payment promise (reconnects a suspended service)
PAYMENTS_REPORT = "payments:report"  # a payment report with its receipt, for staff review
ALL_SCOPES = "*"  # every scope; the spec's JWT user has it

SCOPES: tuple[str, ...] = (
    CLIENTS_READ,
    CLIENTS_VERIFY,
    CLIENTS_WRITE,
    ACCOUNTS_READ,
    TICKETS_READ,
    TICKETS_WRITE,
    NETWORK_PING,
    PLANS_READ,
    AUDIT_READ,
    OUTAGES_READ,
    PAYMENTS_PROMISE,
    PAYMENTS_REPORT,
)
KNOWN_SCOPES = frozenset((*SCOPES, ALL_SCOPES))
# What the spec's JWT user holds.
JWT_SCOPES = frozenset({ALL_SCOPES})


def has_scope(scopes: Iterable[str], required: str) -> bool:
    held = scopes if isinstance(scopes, frozenset | set) else frozenset(scopes)
    return ALL_SCOPES in held or required in held


class InsufficientScope(ServiceError):
    """The credential is valid but lacks the route's scope (CALLERS.md 3)."""

    status_code = 403
    action = Action.INSUFFICIENT_SCOPE

    def __init__(self, required: str) -> None:
        super().__init__(variant="scope", params={"scope": required}, data={"required": required})
        self.required = required


def require_scope(scopes: Iterable[str], required: str) -> None:
    """Raise 403 `insufficient_scope` (`data.required`) unless `scopes` grant `required`."""
    if not has_scope(scopes, required):
        raise InsufficientScope(required)


# -- keys -----------------------------------------------------------------------------------

KEY_PREFIX = "igw_"
KEY_PATTERN = re.compile(r"igw_[A-Za-z0-9_-]{43}")
# A key's name is its caller id (CALLERS.md 1): no ":" so it never looks like "jwt:<sub>".
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
FILE_VERSION = 1
# How often the request path may stat the file; a change shows within this (and 5 s).
CHECK_INTERVAL_SECONDS = 1.0
# How long a keys command waits for another one's lock on the file.
LOCK_WAIT_SECONDS = 30.0
# What `KeyRing.status` says (/ready's `checks.keys`).
KEYS_OK = "ok"
KEYS_UNREADABLE = "unreadable"


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A key as the service knows it: never the key itself, nor its digest."""

    name: str
    scopes: frozenset[str]
    # The key's own cap of requests per minute (429 rate_limited); None = none of its own.
    rate_per_minute: int | None
    created_at: str  # UTC ISO 8601

    def allows(self, scope: str) -> bool:
        return has_scope(self.scopes, scope)


class KeyFileError(Exception):
    """The key file cannot be read or is not a valid key file. The message names the file
    and what is wrong, never a key or a digest."""


def _entry(path: Path, index: int, raw: Any) -> tuple[str, ApiKey]:
    where = f"{path}: key #{index + 1}"
    if not isinstance(raw, dict):
        raise KeyFileError(f"{where} is not an object")
    name = raw.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise KeyFileError(f"{where} has no valid name")
    digest = raw.get("sha256")
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise KeyFileError(f"{where} ({name}) has no valid sha256")
    scopes = raw.get("scopes")
    if not isinstance(scopes, list) or not scopes or not all(isinstance(s, str) for s in scopes):
        raise KeyFileError(f"{where} ({name}) has no list of scopes")
    unknown = sorted(set(scopes) - KNOWN_SCOPES)
    if unknown:
        raise KeyFileError(f"{where} ({name}) has unknown scopes {', '.join(unknown)}")
    rate = raw.get("rate_per_minute")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int) or rate < 1):
        raise KeyFileError(f"{where} ({name}) has an invalid rate_per_minute")
    created = raw.get("created_at")
    if not isinstance(created, str):
        raise KeyFileError(f"{where} ({name}) has no created_at")
    return digest, ApiKey(name, frozenset(scopes), rate, created)


def parse_key_file(path: Path, text: str) -> dict[str, ApiKey]:
    """The keys of a key file's text, by digest; KeyFileError when it is not valid."""
    try:
        data = json.loads(text)
    except ValueError:
        raise KeyFileError(f"{path}: not valid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise KeyFileError(f'{path}: not a key file (no "keys" list)')
    keys: dict[str, ApiKey] = {}
    names: set[str] = set()
    for index, raw in enumerate(data["keys"]):
        digest, key = _entry(path, index, raw)
        if key.name in names:
            raise KeyFileError(f"{path}: the name {key.name} appears twice")
        if digest in keys:
            raise KeyFileError(f"{path}: key {key.name} repeats another key")
        names.add(key.name)
        keys[digest] = key
    return keys


def _read_text(path: Path) -> str | None:
    """The file's text, None when it does not exist; KeyFileError when it cannot be read
    (a mode or owner that refuses us, a directory in its place, bytes that are not UTF-8)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"{path}: cannot be read ({_reason(exc)})") from None


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        return f"{type(exc).__name__}, errno {exc.errno}: {os.strerror(exc.errno)}"
    return type(exc).__name__


def read_key_entries(path: Path) -> list[dict[str, Any]]:
    """The raw entries of a key file (for the CLI), [] when it does not exist yet;
    KeyFileError when it cannot be read or is not a valid key file."""
    text = _read_text(path)
    if text is None:
        return []
    parse_key_file(path, text)  # refuse to build on a broken file
    entries: list[dict[str, Any]] = json.loads(text)["keys"]
    return entries


def check_key_file(path: Path) -> None:
    """Raise KeyFileError unless the service can read `path` as a key file (one that does
    not exist yet is fine: it holds no keys). What start-up and `check-config` ask."""
    read_key_entries(path)


def lock_path(path: Path) -> Path:
    """The lock file beside a key file (`keys.json.lock`); it holds nothing and stays."""
    return path.with_name(path.name + ".lock")


class KeyFileLocked(Exception):
    """Another keys command kept the file's lock longer than LOCK_WAIT_SECONDS."""


@contextlib.contextmanager
def locked_key_file(path: Path, *, wait: float = LOCK_WAIT_SECONDS) -> Iterator[None]:
    """Hold the key file's exclusive lock (`flock` on `lock_path(path)`, created with mode
    0600) for a read-modify-write: two commands at once run one after the other, so
    neither loses the other's change. Released when the block ends (or the process dies).
    OSError when the lock file cannot be made; KeyFileLocked after `wait` seconds."""
    fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    raise KeyFileLocked(f"{lock_path(path)} is held by another command") from None
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)  # releases the lock


def write_key_entries(path: Path, entries: Sequence[Mapping[str, Any]]) -> None:
    """Replace the key file atomically: a temporary file beside it, written and fsync'd,
    then renamed over it (and the directory fsync'd), so a reader sees the old file or the
    new one, never a part. A new file gets mode 0600; an existing one keeps its mode, and
    its owner and group where this process may set them (root may): a file the service
    reads as its own user stays readable to it. Callers that read the file first hold
    `locked_key_file`."""
    try:
        stat = path.stat()
        mode, owner = stat.st_mode & 0o777, (stat.st_uid, stat.st_gid)
    except FileNotFoundError:
        mode, owner = 0o600, None
    text = json.dumps({"version": FILE_VERSION, "keys": list(entries)}, indent=2) + "\n"
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, mode)
        if owner is not None and owner != (os.geteuid(), os.getegid()):
            # Not ours to give away otherwise: the new file is then this user's (the CLI
            # says so).
            with contextlib.suppress(PermissionError):
                os.fchown(fd, *owner)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable (a crash right after must not bring the old
    file back). Best effort: some file systems refuse to open or sync a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def new_entry(
    key: str, name: str, scopes: Iterable[str], rate_per_minute: int | None
) -> dict[str, Any]:
    """The file entry of a new key: its digest, never the key."""
    return {
        "name": name,
        "sha256": key_digest(key),
        "scopes": list(dict.fromkeys(scopes)),
        "rate_per_minute": rate_per_minute,
        "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


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


_Signature = tuple[int, ...] | str | None


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
        self._interval = check_interval
        self._cache_max = cache_size
        self._keys: dict[str, ApiKey] = {}
        # Verified keys of this process's requests, so a bot's next request is not hashed
        # again. In memory only, bounded, emptied on every change of the file.
        self._cache: dict[str, ApiKey] = {}
        self._signature: _Signature = None
        self._checked = float("-inf")
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
        if now - self._checked >= self._interval:
            self.refresh(now)

    def refresh(self, now: float | None = None) -> None:
        """Stat the file and re-read it when it changed since the last look."""
        assert self.path is not None
        self._checked = time.monotonic() if now is None else now
        signature: _Signature
        try:
            stat = os.stat(self.path)
            # ctime too: a chmod or chown (a file the service may no longer read) changes
            # nothing else.
            signature = (stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino)
        except FileNotFoundError:
            signature = "absent"
        except OSError as exc:
            signature = f"error:{exc.errno}"
        if signature == self._signature:
            return
        self._signature = signature
        if signature == "absent":
            self._install({})
            return
        try:
            if isinstance(signature, str):
                raise KeyFileError(f"{self.path}: cannot be read (errno {signature[6:]})")
            text = _read_text(self.path)
            if text is None:  # removed between the stat and the read
                self._install({})
                return
            keys = parse_key_file(self.path, text)
        except KeyFileError as exc:
            # Once per change of the file: the signature is remembered above.
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
