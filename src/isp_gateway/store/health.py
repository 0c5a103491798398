"""What the logs say of the Redis store (issue 28: they never said which store was in use,
and killing the master wrote no WARNING): its name without a password, and one WARNING
when it stops answering and one when it is back, once per transition, not per request."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

log = logging.getLogger("isp_gateway.store")


def redacted_url(url: str) -> str:
    """A Redis URL as logs and messages may show it: scheme, user, host, port and database,
    never a password (in the address or in the query string, which is dropped)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = (f"{parts.username}@" if parts.username else "") + host
    if port is not None:
        netloc += f":{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def address(host: str, port: int) -> str:
    """host:port, an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Health:
    """Whether the store answers, as its commands last found it."""

    def __init__(self, describe: Callable[[], str]) -> None:
        self.describe = describe
        # Since when (time.monotonic) commands fail; None while the store answers.
        self.lost_since: float | None = None

    def lost(self, exc: BaseException) -> None:
        if self.lost_since is not None:
            return
        self.lost_since = time.monotonic()
        log.warning(
            "store lost: %s does not answer (%s); requests that need it answer 503 "
            "store_unavailable until it is back",
            self.describe(),
            type(exc).__name__,
        )

    def answered(self) -> None:
        lost_since = self.lost_since
        if lost_since is None:
            return
        self.lost_since = None
        log.warning(
            "store back: %s answers again after %.1f s",
            self.describe(),
            time.monotonic() - lost_since,
        )
