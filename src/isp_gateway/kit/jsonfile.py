"""A small JSON file that several commands may change at once: read, change, write back.

`update(path, change)` runs one read-modify-write under an exclusive lock, so two commands
run together (`webhooks add` twice, an operator's script and a deploy) never lose each other's
change: the lock is `fcntl.flock` on a lock file beside the data file (`<name>.lock`; the data
file itself is replaced at each write, so a lock on it would be a lock on an old inode). The
new text goes to a temporary file in the same directory, is flushed and fsynced, renamed over
the old one (atomic: a reader sees the old file or the new one, never half of one), and the
directory is fsynced so the rename survives a crash. A new file gets mode 0600 (it may hold
secrets); an existing one keeps its mode.

Used by the webhook subscriptions (notices/subscriptions.py); the API key file
(auth/keys.py) can move onto it. Readers that poll the file (a running service) need no lock:
they always see a whole file.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

NEW_FILE_MODE = 0o600


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of `path` (waits for another holder to finish)."""
    fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, NEW_FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def read_text(path: Path) -> str | None:
    """The file's text, None when it does not exist. Other OSErrors raise."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def write(path: Path, data: Any) -> None:
    """Write `data` as JSON atomically (temporary file, fsync, rename, fsync of the
    directory). Call it under `locked(path)` when others may write too."""
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = NEW_FILE_MODE
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, mode)
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
