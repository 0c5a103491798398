"""Webhook subscriptions (OUTAGES.md 1): the JSON file WEBHOOKS_FILE and the running
service's view of it.

    {"version": 1, "webhooks": [{"id": "wh_3f9c...", "name": "n8n", "url": "https://...",
      "secret": "whsec_...", "events": ["outage.started", "outage.ended"],
      "created_at": "2026-11-24T20:00:00Z"}]}

The signing secret is kept in clear (it signs every notice), so the file is written with mode
0600 under the same lock and atomic rewrite as the key file (kit/jsonfile.py). `id` is made
at `add` and names the subscription's queue in the store: a subscription removed and added
again under the same name is a new one and never receives the old one's notices.

`SubscriptionFile` re-reads the file when its mtime, size or inode change (checked at most once
a second by the sender and the publisher), so a running service sees a change within seconds.
A file that cannot be read or parsed keeps the last good subscriptions and is reported once per
change, by file name; a subscription whose URL the settings do not allow (http:// without
WEBHOOKS_ALLOW_HTTP) is skipped, reported the same way.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import logging
import re
import secrets
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from isp_gateway.kit import jsonfile

log = logging.getLogger("isp_gateway.notices")

FILE_VERSION = 1
SECRET_PREFIX = "whsec_"  # noqa: S105 - the form's prefix, not a secret
# A name is what the CLI and the logs say; the same rule as an API key's name.
NAME_PATTERN = jsonfile.NAME_PATTERN
_ID = re.compile(r"wh_[0-9a-f]{16}")
# The events a subscription may ask for (`webhook.test` is sent by `webhooks test` to any).
EVENT_TYPES = ("outage.started", "outage.ended")
TEST_EVENT = "webhook.test"
CHECK_INTERVAL_SECONDS = 1.0
MAX_URL_LENGTH = 2000


class SubscriptionError(Exception):
    """The file or an entry is not valid. The message names the file or the entry and what
    is wrong, never a secret."""


@dataclass(frozen=True, slots=True)
class Subscription:
    id: str
    name: str
    url: str
    secret: str
    events: frozenset[str]
    created_at: str

    def wants(self, event_type: str) -> bool:
        return event_type in self.events


def new_secret() -> str:
    """A signing secret in the Standard Webhooks form: `whsec_` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _secret_ok(secret: Any) -> bool:
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        return False
    try:
        return len(base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)) >= 16
    except ValueError:
        return False


# Where http:// may go (WEBHOOKS_ALLOW_HTTP): loopback and the private networks, written out.
# Not Python's `is_private`, which also says yes to link-local (169.254.169.254, a cloud's
# metadata service), documentation, reserved and "this network" ranges; everything not
# listed here (multicast, broadcast, unspecified, CGNAT 100.64/10, fe80::/10, ...) is refused.
HTTP_NETWORKS = tuple(
    ipaddress.ip_network(net)
    for net in (
        "127.0.0.0/8",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "::1/128",
        "fc00::/7",
    )
)


def _private(address: str) -> bool:
    """Whether an IP address (ValueError for anything else) is one http:// may go to."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        # ::ffff:a.b.c.d reaches a.b.c.d: judged by it.
        ip = ip.ipv4_mapped
    return any(ip in net for net in HTTP_NETWORKS)


def url_problem(url: str, allow_http: bool) -> str | None:
    """Why `url` may not receive notices, or None. https:// anywhere; http:// only with
    WEBHOOKS_ALLOW_HTTP and to a loopback or private address (an IP written so, `localhost`,
    or a name: its addresses are checked when a notice is sent, `http_addresses_problem`)."""
    if not isinstance(url, str) or len(url) > MAX_URL_LENGTH or any(c.isspace() for c in url):
        return "not a URL"
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return "must be an https:// URL with a host"
    if parts.username or parts.password:
        return "must not carry a user or password (the signature authenticates the sender)"
    try:
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return "has an invalid port"
    if parts.scheme == "https":
        return None
    if not allow_http:
        return "must be https:// (http:// needs WEBHOOKS_ALLOW_HTTP=true, loopback or private)"
    host = parts.hostname
    try:
        if not _private(host):
            return "http:// is allowed to a loopback or private address only"
    except ValueError:
        pass  # a name: resolved when sending
    return None


def http_addresses_problem(url: str) -> str | None:
    """For an http:// URL: None when every address its host resolves to is loopback or
    private (HTTP_NETWORKS); else why not (https:// URLs: always None). Checked before each
    attempt, so a name that resolves elsewhere since it was added is refused. Blocking
    (DNS): run it in a thread."""
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname is None:
        return None
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 80, proto=socket.IPPROTO_TCP)
    except OSError:
        return f"the host {parts.hostname} does not resolve"
    if any(not _private(str(info[4][0])) for info in infos):
        return (
            f"the host {parts.hostname} resolves to an address other than loopback or private "
            "(http:// is not allowed there)"
        )
    return None


def _entry(path: Path, index: int, raw: Any, allow_http: bool) -> Subscription:
    raw, name = jsonfile.named(raw, f"{path}: webhook #{index + 1}", SubscriptionError)
    where = f"{path}: webhook {name}"
    sub_id = raw.get("id")
    if not isinstance(sub_id, str) or not _ID.fullmatch(sub_id):
        raise SubscriptionError(f"{where} has no valid id")
    url = raw.get("url")
    problem = url_problem(url, allow_http) if isinstance(url, str) else "missing"
    if problem is not None:
        raise SubscriptionError(f"{where}: its url {problem}")
    if not _secret_ok(raw.get("secret")):
        raise SubscriptionError(f"{where} has no valid secret (whsec_ + base64)")
    events = raw.get("events")
    if not isinstance(events, list) or not events or not set(events) <= set(EVENT_TYPES):
        raise SubscriptionError(f"{where}: events must list some of {', '.join(EVENT_TYPES)}")
    created = raw.get("created_at")
    return Subscription(
        sub_id, name, str(url), raw["secret"], frozenset(events), str(created or "")
    )


def parse(path: Path, text: str, *, allow_http: bool) -> tuple[list[Subscription], list[str]]:
    """The valid subscriptions of the file's text, and a problem line for each entry
    skipped. SubscriptionError when the file as a whole is not a subscriptions file."""
    listed = jsonfile.entries(path, text, "webhooks", "webhooks", SubscriptionError)
    found: list[Subscription] = []
    problems: list[str] = []
    names: set[str] = set()
    for index, raw in enumerate(listed):
        try:
            subscription = _entry(path, index, raw, allow_http)
        except SubscriptionError as exc:
            problems.append(str(exc))
            continue
        if subscription.name in names:
            problems.append(f"{path}: the name {subscription.name} appears twice")
            continue
        names.add(subscription.name)
        found.append(subscription)
    return found, problems


# -- changing the file (the CLI) -------------------------------------------------------------


def entries(text: str | None, path: Path) -> list[dict[str, Any]]:
    """The raw entries of the file's text ([] for no file); SubscriptionError when broken."""
    if text is None:
        return []
    parse(path, text, allow_http=True)  # refuse to build on a broken file
    listed: list[dict[str, Any]] = json.loads(text)["webhooks"]
    return listed


def new_entry(name: str, url: str, events: list[str]) -> dict[str, Any]:
    return {
        "id": "wh_" + secrets.token_hex(8),
        "name": name,
        "url": url,
        "secret": new_secret(),
        "events": list(dict.fromkeys(events)),
        "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def add(path: Path, entry: dict[str, Any]) -> None:
    """Add one subscription under the file's lock; SubscriptionError for a taken name."""

    def change(text: str | None) -> tuple[Any, None]:
        listed = entries(text, path)
        if any(e.get("name") == entry["name"] for e in listed):
            raise SubscriptionError(f"a webhook named {entry['name']!r} already exists")
        return {"version": FILE_VERSION, "webhooks": [*listed, entry]}, None

    jsonfile.update(path, change)


def remove(path: Path, name: str) -> bool:
    """Remove the subscription `name` under the file's lock; False when there is none."""

    def change(text: str | None) -> tuple[Any, bool]:
        listed = entries(text, path)
        kept = [e for e in listed if e.get("name") != name]
        if len(kept) == len(listed):
            return None, False
        return {"version": FILE_VERSION, "webhooks": kept}, True

    return jsonfile.update(path, change)


# -- the running service's view --------------------------------------------------------------


class SubscriptionFile:
    """The subscriptions of WEBHOOKS_FILE, kept current with the file (none without one)."""

    def __init__(
        self,
        path: Path | None,
        *,
        allow_http: bool,
        check_interval: float = CHECK_INTERVAL_SECONDS,
    ) -> None:
        self.path = path
        self.allow_http = allow_http
        self._subscriptions: list[Subscription] = []
        self._watch = jsonfile.Watch(path, check_interval) if path is not None else None

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def current(self) -> list[Subscription]:
        """The subscriptions now (the file is looked at at most once per check interval)."""
        if self._watch is not None and self._watch.due(time.monotonic()):
            self.refresh()
        return self._subscriptions

    def by_id(self, sub_id: str) -> Subscription | None:
        return next((s for s in self.current() if s.id == sub_id), None)

    def refresh(self) -> None:
        assert self.path is not None and self._watch is not None
        looked = self._watch.look()
        if looked is None:
            return
        if looked.absent:
            self._subscriptions = []
            return
        try:
            text = jsonfile.read_text(self.path) if looked.error is None else None
            if text is None:
                raise SubscriptionError(f"{self.path}: cannot be read")
            found, problems = parse(self.path, text, allow_http=self.allow_http)
        except (SubscriptionError, OSError, UnicodeDecodeError) as exc:
            reason = exc if isinstance(exc, SubscriptionError) else type(exc).__name__
            log.error(
                "WEBHOOKS_FILE %s; keeping the %d webhooks read before",
                reason,
                len(self._subscriptions),
            )
            return
        for problem in problems:  # once per change of the file
            log.error("WEBHOOKS_FILE %s; that webhook is skipped", problem)
        self._subscriptions = found
