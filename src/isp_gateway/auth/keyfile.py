"""The API key file (CALLERS.md 3 and 6): what a key is, how the file is read, checked and
written. The running service's ring of keys is in keys.py.

Writers (`isp-gateway keys create|revoke`) hold `locked_key_file` around their
read-modify-write and `write_key_entries` replaces the file atomically (kit/jsonfile.py):
concurrent commands never lose a key or bring a revoked one back. A file that cannot be read
or parsed is a `KeyFileError` naming the file and what is wrong, never a key or a digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from isp_gateway.auth.scopes import ALL_SCOPES, KNOWN_SCOPES
from isp_gateway.kit import jsonfile

KEY_PREFIX = "igw_"
KEY_PATTERN = re.compile(r"igw_[A-Za-z0-9_-]{43}")
# A key's name is its caller id (CALLERS.md 1): no ":" so it never looks like "jwt:<sub>".
NAME_PATTERN = jsonfile.NAME_PATTERN
_DIGEST = re.compile(r"[0-9a-f]{64}")
FILE_VERSION = 1
# How long a keys command waits for another one's lock on the file.
LOCK_WAIT_SECONDS = 30.0


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
        # scopes.has_scope's rule, on the frozenset a key always holds (every request reads it).
        scopes = self.scopes
        return scope in scopes or ALL_SCOPES in scopes


class KeyFileError(Exception):
    """The key file cannot be read or is not a valid key file. The message names the file
    and what is wrong, never a key or a digest."""


def _entry(path: Path, index: int, raw: Any) -> tuple[str, ApiKey]:
    where = f"{path}: key #{index + 1}"
    raw, name = jsonfile.named(raw, where, KeyFileError)
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
    keys: dict[str, ApiKey] = {}
    names: set[str] = set()
    for index, raw in enumerate(jsonfile.entries(path, text, "keys", "key", KeyFileError)):
        digest, key = _entry(path, index, raw)
        if key.name in names:
            raise KeyFileError(f"{path}: the name {key.name} appears twice")
        if digest in keys:
            raise KeyFileError(f"{path}: key {key.name} repeats another key")
        names.add(key.name)
        keys[digest] = key
    return keys


def read_text(path: Path) -> str | None:
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
    text = read_text(path)
    if text is None:
        return []
    parse_key_file(path, text)  # refuse to build on a broken file
    entries: list[dict[str, Any]] = json.loads(text)["keys"]
    return entries


def check_key_file(path: Path) -> None:
    """Raise KeyFileError unless the service can read `path` as a key file (one that does
    not exist yet is fine: it holds no keys). What start-up and `check-config` ask. Its
    directory must exist, as `check-config --probe` said: a typo there (`/etc/isp-gatway/...`)
    started a service holding no keys for good, every bot refused 401, since `keys create`
    cannot make the file there either."""
    if not path.exists() and not path.parent.is_dir():
        raise KeyFileError(f"{path}: its directory {path.parent} does not exist")
    read_key_entries(path)


def lock_path(path: Path) -> Path:
    """The lock file beside a key file (`keys.json.lock`); it holds nothing and stays."""
    return jsonfile.lock_path(path)


# Another keys command kept the file's lock longer than LOCK_WAIT_SECONDS.
KeyFileLocked = jsonfile.FileLocked


def locked_key_file(path: Path, *, wait: float = LOCK_WAIT_SECONDS) -> AbstractContextManager[None]:
    """Hold the key file's exclusive lock for a read-modify-write (kit/jsonfile.py): two
    commands at once run one after the other, so neither loses the other's change.
    OSError when the lock file cannot be made; KeyFileLocked after `wait` seconds."""
    return jsonfile.locked(path, wait=wait)


def write_key_entries(path: Path, entries: Sequence[Mapping[str, Any]]) -> None:
    """Replace the key file atomically (kit/jsonfile.py: a temporary file, fsync, rename), so
    a reader sees the old file or the new one, never a part, keeping its mode and, where
    allowed, its owner: a file the service reads as its own user stays readable to it.
    Callers that read the file first hold `locked_key_file`."""
    jsonfile.write(path, {"version": FILE_VERSION, "keys": list(entries)})


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
