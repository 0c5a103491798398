"""Logging: the text or JSON line format, and the access log written in small batches.

The access log is on by default, so it must be cheap: a request only appends a tuple to a
list; the lines are formatted and written a batch at a time, in one record and one write.
The batch is handed to `logging` as a single record whose message is an `AccessBatch`, so
handlers, levels and test capture keep working; our formatters render one line per entry.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import stat
import sys
import time
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import IO, Any

dumps = json.dumps
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
ACCESS_LOGGER = "isp_gateway.access"

# The id of the request being served, for log lines written while it is handled.
request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)

# Documents and phones travel in lookup paths; logs show them masked. Everything after the
# lookup's name goes: a phone sent as "315/123 4567" is several path segments. Matched by
# lookbehind so the replacement is a plain literal (a group reference in it costs a
# template expansion per line).
_PERSONAL_SEGMENT = re.compile(r"(?:(?<=/by-document/)|(?<=/by-phone/)).+", re.DOTALL)


def mask_path(path: str) -> str:
    return _PERSONAL_SEGMENT.sub("***", path) if "/by-" in path else path


# A path no route knows may hold anything a caller typed: a document or a phone among
# them. Its runs of 6 or more digits are masked (a service id has fewer in practice, and an
# unknown path needs none of its digits to be understood).
_LONG_DIGITS = re.compile(r"\d{6,}")


def mask_unknown_path(path: str) -> str:
    """An unknown path as logged: `mask_path`, then every run of 6+ digits masked."""
    return _LONG_DIGITS.sub("***", mask_path(path))


# Characters that would break a text log line or forge another one: C0 controls (a %0A
# in a path decodes to a real newline), DEL, C1 controls and Unicode's line separators.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escape_control(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char)
    return named or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def escape_control(text: str) -> str:
    """`text` on one line: control characters written as `\\n`, `\\r`, `\\t` or `\\xNN`."""
    return _CONTROL.sub(_escape_control, text) if not text.isprintable() else text


# One request: (time, method, masked path, status, duration ms, request id). A plain
# tuple: it is built on every request, and a NamedTuple's constructor costs ten times more.
# The path is masked by the caller: the lookup edge knows its masked path without a regex.
AccessEntry = tuple[float, str, str, int, float, str]


def access_message(entry: AccessEntry) -> str:
    _, method, path, status, duration_ms, request_id = entry
    return f"{method} {path} {status} {duration_ms:.1f}ms id={request_id}"


class AccessBatch:
    """The message of one access-log record: several requests, one line each."""

    __slots__ = ("entries",)

    def __init__(self, entries: list[AccessEntry]) -> None:
        self.entries = entries

    def __str__(self) -> str:  # what a foreign formatter shows
        return "\n".join([access_message(entry) for entry in self.entries])


class _SecondCache:
    """Formatting a timestamp costs more than the rest of a line; it changes once a second."""

    def __init__(self, render: Any) -> None:
        self._render = render
        self._second = -1
        self._text = ""

    def __call__(self, created: float) -> str:
        second = int(created)
        if second != self._second:
            self._second, self._text = second, self._render(second)
        return self._text


class TextFormatter(logging.Formatter):
    """The default format, unchanged: `time LEVEL logger: message`."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._seconds = _SecondCache(
            lambda s: time.strftime(self.default_time_format, self.converter(s))
        )

    def format(self, record: logging.LogRecord) -> str:
        if isinstance(record.msg, AccessBatch):
            seconds, prefix = self._seconds, f" {record.levelname} {record.name}: "
            return "\n".join(
                [
                    f"{seconds(t)},{int(t % 1 * 1000):03d}{prefix}{escape_control(method)} "
                    f"{escape_control(path)} {status} {ms:.1f}ms id={rid}"
                    for t, method, path, status, ms, rid in record.msg.entries
                ]
            )
        return super().format(record)

    def formatMessage(self, record: logging.LogRecord) -> str:
        # The message part only: a traceback appended after it keeps its own lines.
        return escape_control(super().formatMessage(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC), level, logger, message, request id, and for
    access lines method, masked path, status and duration."""

    def __init__(self) -> None:
        super().__init__()
        self._seconds = _SecondCache(
            lambda s: datetime.fromtimestamp(s, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        )

    def _time(self, created: float) -> str:
        return f"{self._seconds(created)}.{int(created % 1 * 1000):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        if isinstance(record.msg, AccessBatch):
            # Written by hand: a dict through json.dumps costs several times more. The
            # request id needs no escaping (the middleware keeps only [A-Za-z0-9._-]).
            head = f'"level":"{record.levelname}","logger":"{record.name}"'
            lines = []
            for entry in record.msg.entries:
                t, method, path, status, ms, rid = entry
                lines.append(
                    f'{{"time":"{self._time(t)}",{head},"message":{dumps(access_message(entry))},'
                    f'"request_id":"{rid}","method":{dumps(method)},'
                    f'"path":{dumps(path)},"status":{status},"duration_ms":{ms:.2f}}}'
                )
            return "\n".join(lines)

        line: dict[str, Any] = {
            "time": self._time(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or request_id_var.get(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line)


def configure_logging(level: str, fmt: str = "text") -> None:
    """The root handler on stderr in the chosen format; called in every server process."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    # httpx logs every request URL at INFO; ours are enough.
    logging.getLogger("httpx").setLevel(logging.WARNING)


# Lines in one batch. On a pipe or a socket (a container runtime, journald) several
# workers may share, a write up to PIPE_BUF (4 KiB, about 32 text lines) is atomic, so their
# lines never interleave. To a file (appends do not interleave either) or a terminal, a
# batch may be larger: each write costs the server about 130 µs, 4 µs a request at 32
# lines (bench/lookups.py, access log on and off).
PIPE_BATCH = 32
FILE_BATCH = 256


def default_batch(stream: IO[str] | None = None) -> int:
    """The batch size for where the log lines go (stderr unless told)."""
    try:
        mode = os.fstat((stream or sys.stderr).fileno()).st_mode
    except (AttributeError, OSError, ValueError):  # no real file behind it (a test capture)
        return PIPE_BATCH
    return PIPE_BATCH if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else FILE_BATCH


class AccessLog:
    """Collects one entry per request and logs them in batches: when `max_batch` are
    waiting (`default_batch`), `interval` seconds after the first of a batch, and at
    shutdown."""

    def __init__(self, max_batch: int | None = None, interval: float = 0.25) -> None:
        self.logger = logging.getLogger(ACCESS_LOGGER)
        self.max_batch = default_batch() if max_batch is None else max_batch
        self.interval = interval
        self._entries: list[AccessEntry] = []
        self._timer: asyncio.TimerHandle | None = None

    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)  # cached by `logging`

    def add(
        self, method: str, masked_path: str, status: int, duration_ms: float, request_id: str
    ) -> None:
        """One request's line; `masked_path` has been through `mask_path` (or is known
        to hold nothing personal)."""
        entries = self._entries
        entries.append((time.time(), method, masked_path, status, duration_ms, request_id))
        if len(entries) >= self.max_batch:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.interval, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        entries, self._entries = self._entries, []
        if entries:
            record = self.logger.makeRecord(
                self.logger.name, logging.INFO, __file__, 0, AccessBatch(entries), (), None
            )
            self.logger.handle(record)
