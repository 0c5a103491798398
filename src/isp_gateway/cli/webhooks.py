"""`webhooks` (outage notices, OUTAGES.md 1): add, list, remove and test the subscriptions in
WEBHOOKS_FILE, and `receive`, a small receiver that verifies and prints notices (the demo,
a first check of a setup)."""

from __future__ import annotations

import argparse
import json
import re
import secrets
import signal
import sys
import time
from pathlib import Path
from typing import Any

from isp_gateway.cli.common import EXIT_CONFIG

_ID_LIST = re.compile(r"\[\s*((?:-?\d+,?\s*)+)\]")
TEST_MESSAGE = "Prueba de notificaciones de isp-gateway: este receptor está bien configurado."


def _one_line(found: re.Match[str]) -> str:
    return "[" + ", ".join(found.group(1).replace(",", " ").split()) + "]"


def add_parser(sub: Any, formatter: type[argparse.HelpFormatter]) -> None:
    hooks = sub.add_parser(
        "webhooks",
        help="outage notices: add, list, remove or test webhooks (WEBHOOKS_FILE)",
        formatter_class=formatter,
    )
    hooks_sub = hooks.add_subparsers(dest="webhooks_command", required=True)
    add = hooks_sub.add_parser(
        "add", help="subscribe a URL; its signing secret is printed once", formatter_class=formatter
    )
    add.add_argument("name", help="the subscription's name (logs, the audit, `remove`)")
    add.add_argument("url", help="https://... (http:// to loopback/private: WEBHOOKS_ALLOW_HTTP)")
    add.add_argument(
        "--events",
        default="outage.started,outage.ended",
        help="comma-separated: outage.started, outage.ended (default both)",
    )
    hooks_sub.add_parser(
        "list",
        help="names, URLs, events and creation times (no secrets)",
        formatter_class=formatter,
    )
    remove = hooks_sub.add_parser("remove", help="unsubscribe by name", formatter_class=formatter)
    remove.add_argument("name")
    test = hooks_sub.add_parser(
        "test", help="send one webhook.test now; print the answer", formatter_class=formatter
    )
    test.add_argument("name")
    receive = hooks_sub.add_parser(
        "receive",
        help="a receiver on loopback that verifies and prints every notice",
        formatter_class=formatter,
    )
    receive.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    receive.add_argument("--port", type=int, required=True, help="the port to listen on")
    receive.add_argument("--secret", required=True, help="the whsec_... of the subscription")
    hooks.set_defaults(func=cmd_webhooks)


def _file_settings() -> tuple[Path | None, bool]:
    """WEBHOOKS_FILE and WEBHOOKS_ALLOW_HTTP from the environment or .env, alone: managing
    subscriptions needs no other setting."""
    from pydantic_settings import BaseSettings, SettingsConfigDict

    class WebhooksFile(BaseSettings):
        model_config = SettingsConfigDict(
            env_file=".env", env_file_encoding="utf-8", case_sensitive=True, extra="ignore"
        )
        WEBHOOKS_FILE: str = ""
        WEBHOOKS_ALLOW_HTTP: bool = False

    read = WebhooksFile()
    value = read.WEBHOOKS_FILE.strip()
    return (Path(value) if value else None), read.WEBHOOKS_ALLOW_HTTP


def _error(text: str) -> None:
    print(f"isp-gateway: {text}", file=sys.stderr)


def cmd_webhooks(ns: argparse.Namespace) -> int:
    if ns.webhooks_command == "receive":
        return cmd_receive(ns)
    from isp_gateway.notices import subscriptions as subs

    path, allow_http = _file_settings()
    if path is None:
        _error(
            "WEBHOOKS_FILE is not set; set it (in the environment or .env) to the JSON file that "
            "holds the webhook subscriptions, e.g. WEBHOOKS_FILE=/etc/isp-gateway/webhooks.json"
        )
        return EXIT_CONFIG
    try:
        from isp_gateway.kit.jsonfile import read_text

        entries = subs.entries(read_text(path), path)
        if ns.webhooks_command == "list":
            return _list(path, entries)
        if ns.webhooks_command == "remove":
            if not subs.remove(path, ns.name):
                _error(f"no webhook named {ns.name!r} in {path}")
                return EXIT_CONFIG
            print(f"removed {ns.name}; running services stop sending to it within 5 s")
            return 0
        if ns.webhooks_command == "test":
            return _test(entries, ns.name, allow_http)
        return _add(path, entries, ns, allow_http)
    except subs.SubscriptionError as exc:
        _error(f"WEBHOOKS_FILE {exc}; nothing changed")
        return 1
    except (OSError, UnicodeDecodeError) as exc:
        _error(f"cannot read or write {path} ({type(exc).__name__})")
        return 1


def _row(entry: dict[str, Any]) -> tuple[str, str, str, str]:
    events = ",".join(entry.get("events") or [])
    return str(entry.get("name")), str(entry.get("url")), events, str(entry.get("created_at"))


def _list(path: Path, entries: list[dict[str, Any]]) -> int:
    if not entries:
        print(f"no webhooks in {path}")
        return 0
    rows = [_row(entry) for entry in entries]
    header = ("NAME", "URL", "EVENTS", "CREATED")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)]
        print("  ".join([*cells, row[3]]))
    return 0


def _add(
    path: Path, entries: list[dict[str, Any]], ns: argparse.Namespace, allow_http: bool
) -> int:
    from isp_gateway.notices import subscriptions as subs

    if not subs.NAME_PATTERN.fullmatch(ns.name):
        _error(
            f"invalid webhook name {ns.name!r}: 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
        return EXIT_CONFIG
    problem = subs.url_problem(ns.url, allow_http) or subs.http_addresses_problem(ns.url)
    if problem is not None:
        _error(f"the URL {problem}")
        return EXIT_CONFIG
    if any(e.get("name") == ns.name for e in entries):
        _error(f"a webhook named {ns.name!r} already exists; remove it first or choose another")
        return EXIT_CONFIG
    events = [part.strip() for part in ns.events.split(",") if part.strip()]
    unknown = [e for e in events if e not in subs.EVENT_TYPES]
    if not events or unknown:
        what = f"unknown event {', '.join(unknown)}" if unknown else "no event given"
        _error(f"{what}; choose from {', '.join(subs.EVENT_TYPES)}")
        return EXIT_CONFIG
    entry = subs.new_entry(ns.name, ns.url, events)
    subs.add(path, entry)
    print(entry["secret"])
    print(
        f"(webhook {ns.name!r} added; running services send to it within 5 s. The line above is "
        "its signing secret, shown only now: give it to the receiver to verify signatures.)",
        file=sys.stderr,
    )
    return 0


def _test(entries: list[dict[str, Any]], name: str, allow_http: bool) -> int:
    import httpx

    from isp_gateway.notices import signing
    from isp_gateway.notices import subscriptions as subs
    from isp_gateway.notices.sender import ATTEMPT_SECONDS

    entry = next((e for e in entries if e.get("name") == name), None)
    if entry is None:
        _error(f"no webhook named {name!r}")
        return EXIT_CONFIG
    url = str(entry["url"])
    problem = subs.url_problem(url, allow_http) or subs.http_addresses_problem(url)
    if problem is not None:
        _error(f"the URL of {name} {problem}")
        return EXIT_CONFIG
    msg_id = f"msg_test_{secrets.token_hex(8)}"
    data = {"webhook": name, "message": TEST_MESSAGE}
    body = signing.body_text(subs.TEST_EVENT, time.time(), data)
    headers = signing.signed_headers(str(entry["secret"]), msg_id, body)
    print(f"POST {url} ({subs.TEST_EVENT}, webhook-id {msg_id})")
    try:
        answer = httpx.post(url, content=body.encode(), headers=headers, timeout=ATTEMPT_SECONDS)
    except httpx.HTTPError as exc:
        print(f"no answer: {type(exc).__name__} ({exc})")
        return 1
    text = answer.text[:500].replace("\n", " ")
    print(f"HTTP {answer.status_code} {answer.reason_phrase}" + (f": {text}" if text else ""))
    return 0 if answer.is_success else 1


def cmd_receive(ns: argparse.Namespace) -> int:
    """Print every notice whose signature verifies; answer 204 (401 to a bad signature)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from standardwebhooks import Webhook

    try:
        hook = Webhook(ns.secret)
    except Exception:
        _error("--secret is not a whsec_... secret")
        return EXIT_CONFIG

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                event = hook.verify(body, dict(self.headers))
            except Exception as exc:
                print(f"refused a request: {exc}", flush=True)
                self.send_response(401)
                self.end_headers()
                return
            text = json.dumps(event, ensure_ascii=False, indent=2)
            # Lists of ids on one line each, not one id a line.
            text = _ID_LIST.sub(
                lambda m: f"[{', '.join(m.group(1).replace(',', ' ').split())}]", text
            )
            print(f"verified {event.get('type')} (webhook-id {self.headers['webhook-id']})")
            print(text, flush=True)
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one block per notice above, not an access line

    server = ThreadingHTTPServer((ns.host, ns.port), Receiver)
    # Ctrl-C and SIGTERM stop it, whatever it inherited: started in the background (a
    # script's `&`, a pytest-xdist worker) it is born ignoring SIGINT, and `demo`, which
    # stops it with SIGINT, waited 10 s for it and then killed it. Set before it
    # says it listens: a signal sent once it does is never missed.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        # On stderr: stdout is the notices themselves (and, under `demo`, the demo's banner).
        print(
            f"receiving webhooks on http://{ns.host}:{ns.port}/ (Ctrl-C stops)",
            file=sys.stderr,
            flush=True,
        )
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
