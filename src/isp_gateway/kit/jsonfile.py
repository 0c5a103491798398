"""A small JSON file that several commands may change at once: read, change, write back.

`update(path, change)` runs one read-modify-write under an exclusive lock, so two commands
run together (`webhooks add` twice, an operator's script and a deploy) never lose each other's
change: the lock is `fcntl.flock` on a lock file beside the data file (`<name>.lock`; the data
file itself is replaced at each write, so a lock on it would be a lock on an old inode). The
new text goes to a temporary file in the same directory, is flushed and fsynced, renamed over
the old one (atomic: a reader sees the old file or the new one, never half of one), and the
directory is fsynced so the rename survives a crash. A new file gets mode 0600 (it may hold
secrets); an existing one keeps its mode.

Used by the API key file (auth/keyfile.py) and the webhook subscriptions
(notices/subscriptions.py), both a list of named entries (`entries`, `named`). Readers that
poll the file (a running service, `Watch`) need no lock: they always see a whole file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

NEW_FILE_MODE = 0o600
# The name of an entry (a key, a webhook): what the commands and the audit call it.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


class FileLocked(Exception):
    """Another command held the file's lock longer than the wait allowed."""


@contextmanager
def locked(path: Path, *, wait: float | None = None) -> Iterator[None]:
    """Hold the exclusive lock of `path`: waits for another holder to finish, at most `wait`
    seconds when given (then FileLocked). Released when the block ends, or the process dies."""
    fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, NEW_FILE_MODE)
    try:
        if wait is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() >= deadline:
                        raise FileLocked(f"{lock_path(path)} is held by another command") from None
                    time.sleep(0.01)
        yield
    finally:
        os.close(fd)  # releases the lock


def read_text(path: Path) -> str | None:
    """The file's text, None when it does not exist. Other OSErrors raise."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def write(path: Path, data: Any) -> None:
    """Write `data` as JSON atomically (temporary file, fsync, rename, fsync of the
    directory). Call it under `locked(path)` when others may write too. A new file gets
    mode 0600; an existing one keeps its mode, and its owner and group where this process
    may set them (root may): a file the service reads as its own user stays readable to it."""
    try:
        stat = path.stat()
        mode, owner = stat.st_mode & 0o777, (stat.st_uid, stat.st_gid)
    except FileNotFoundError:
        mode, owner = NEW_FILE_MODE, None
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, mode)
        if owner is not None and owner != (os.geteuid(), os.getegid()):
            # Not ours to give away otherwise: the new file is then this user's.
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
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # a directory that cannot be opened for reading: the rename stands anyway
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a directory
    finally:
        os.close(fd)


def update(path: Path, change: Callable[[str | None], tuple[Any | None, T]]) -> T:
    """One locked read-modify-write: `change(text or None)` returns (the new data, or None to
    leave the file as it is; a result for the caller). Exceptions from `change` leave the
    file untouched."""
    with locked(path):
        new, result = change(read_text(path))
        if new is not None:
            write(path, new)
        return result


# -- a file of named entries ----------------------------------------------------------------


def entries(path: Path, text: str, key: str, kind: str, error: type[Exception]) -> list[Any]:
    """The list under `key` of the file's text (a `kind` file); `error` when the text is not
    JSON or has no such list."""
    try:
        data = json.loads(text)
    except ValueError:
        raise error(f"{path}: not valid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise error(f'{path}: not a {kind} file (no "{key}" list)')
    listed: list[Any] = data[key]
    return listed


def named(raw: Any, where: str, error: type[Exception]) -> tuple[dict[str, Any], str]:
    """An entry (`where` says which) and its name; `error` when it is not an object with a
    valid name."""
    if not isinstance(raw, dict):
        raise error(f"{where} is not an object")
    name = raw.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise error(f"{where} has no valid name")
    return raw, name


# -- a running service's view ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Looked:
    """A file that changed since the last look: `absent`, or not to be looked at (`error`),
    or else to be read again."""

    absent: bool = False
    error: OSError | None = None


class Watch:
    """A file a running service keeps current with: looked at (one stat) at most once per
    `interval`, and read again only when it changed."""

    def __init__(self, path: Path, interval: float) -> None:
        self.path, self.interval = path, interval
        self._signature: tuple[int, ...] | str | None = None
        self._looked = float("-inf")

    def due(self, now: float) -> bool:
        return now - self._looked >= self.interval

    def look(self, now: float | None = None) -> Looked | None:
        """How the file changed since the last look; None when it did not."""
        self._looked = time.monotonic() if now is None else now
        signature: tuple[int, ...] | str
        error = None
        try:
            stat = os.stat(self.path)
            # ctime too: a chmod or chown (a file the service may no longer read) changes
            # nothing else.
            signature = (stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino)
        except FileNotFoundError:
            signature = "absent"
        except OSError as exc:
            signature, error = f"error:{exc.errno}", exc
        if signature == self._signature:
            return None
        self._signature = signature
        return Looked(absent=signature == "absent", error=error)
