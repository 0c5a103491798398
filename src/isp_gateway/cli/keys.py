"""`keys` (API keys in API_KEYS_FILE) and `hash-password`."""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from isp_gateway.cli.common import EXIT_CONFIG

# A bcrypt hash of a short password falls to a guess: `hash-password` refuses those.
MIN_PASSWORD_CHARS = 12

# What each scope lets a key do (CALLERS.md 3), for `keys create --help`.
SCOPE_HELP = {
    "clients:read": "list, search and look up clients (document, phone, service id)",
    "clients:verify": "verify a client's identity, resolve one without a service id",
    "clients:write": "update a client's phone or document (PUT)",
    "accounts:read": "a client's account (balance, invoices) and the payment methods",
    "tickets:read": "ticket subjects, a ticket, a zone's status, a client's tickets",
    "tickets:write": "create tickets",
    "network:ping": "remote pings of a client's antenna, and diagnose",
    "plans:read": "the internet plans",
    "audit:read": "the audit log (GET /api/v1/audit)",
    "outages:read": "the routers under a general outage (GET /api/v1/outages, current_outages)",
    "payments:promise": "a payment promise that reconnects a suspended service (always verified)",
    "payments:report": "a payment report with its receipt, for staff review (always verified)",
    "*": "every scope above",
}


def scopes_epilog() -> str:
    """The scopes, one a line, for `keys create --help`."""
    from isp_gateway.auth import keys

    names = (*keys.SCOPES, keys.ALL_SCOPES)
    width = max(len(name) for name in names)
    lines = [f"  {name.ljust(width)}  {SCOPE_HELP.get(name, '')}".rstrip() for name in names]
    return "scopes (--scopes takes any of them, comma-separated):\n" + "\n".join(lines)


def cmd_hash_password(ns: argparse.Namespace) -> int:
    from isp_gateway.auth.passwords import hash_password

    # Read from a prompt or stdin, never argv: argv is visible to every user via `ps`.
    if ns.refused_argv:
        # Caught here rather than by argparse, whose error would print the password back.
        print(
            "isp-gateway: a password on the command line is refused (it shows in `ps` and "
            "shell history); type it at the prompt or pipe it on stdin",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    if sys.stdin.isatty():
        password = getpass.getpass("Password: ")
        if getpass.getpass("Repeat: ") != password:
            print("isp-gateway: passwords do not match", file=sys.stderr)
            return 1
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        print("isp-gateway: empty password", file=sys.stderr)
        return 1
    if len(password) < MIN_PASSWORD_CHARS:
        print(
            f"isp-gateway: the password is too short: at least {MIN_PASSWORD_CHARS} characters "
            "(it is typed once, into the bot's configuration: make it long)",
            file=sys.stderr,
        )
        return 1
    if len(password.encode()) > 72:
        print("isp-gateway: bcrypt uses at most 72 bytes of a password", file=sys.stderr)
        return 1
    print(hash_password(password))
    return 0


def _keys_file_or_exit() -> Any:
    """API_KEYS_FILE from the environment or .env, alone: managing keys needs no other
    setting (the service's secrets need not be present where keys are made)."""
    from pathlib import Path

    from pydantic_settings import BaseSettings, SettingsConfigDict

    class KeysFile(BaseSettings):
        model_config = SettingsConfigDict(
            env_file=".env", env_file_encoding="utf-8", case_sensitive=True, extra="ignore"
        )
        API_KEYS_FILE: str = ""

    value = KeysFile().API_KEYS_FILE.strip()
    if not value:
        print(
            "isp-gateway: API_KEYS_FILE is not set; set it (in the environment or .env) to "
            "the JSON file that holds the API keys, "
            "e.g. API_KEYS_FILE=/etc/isp-gateway/keys/keys.json",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_CONFIG)
    return Path(value)


def cmd_keys(ns: argparse.Namespace) -> int:
    from isp_gateway.auth import keys

    path = _keys_file_or_exit()
    if ns.keys_command == "list":
        return _list_keys(path)
    scopes: list[str] = []
    if ns.keys_command == "create":
        valid = _valid_create_or_none(ns)
        if valid is None:
            return EXIT_CONFIG
        scopes = valid
    # One read-modify-write at a time (CALLERS.md 6): a create and a revoke at once never
    # lose a key nor bring a revoked one back.
    try:
        with keys.locked_key_file(path):
            try:
                entries = keys.read_key_entries(path)
            except keys.KeyFileError as exc:
                print(f"isp-gateway: API_KEYS_FILE {exc}; nothing changed", file=sys.stderr)
                return 1
            if ns.keys_command == "revoke":
                return _revoke(path, entries, ns.name)
            return _create(path, entries, ns.name, scopes, ns.rate_per_minute)
    except keys.KeyFileLocked as exc:
        print(f"isp-gateway: API_KEYS_FILE {exc}; nothing changed", file=sys.stderr)
        return 1
    except OSError as exc:
        # The lock file beside it cannot be made (a missing directory, no write permission).
        print(f"isp-gateway: cannot write {path} ({type(exc).__name__})", file=sys.stderr)
        return 1


def _list_keys(path: Any) -> int:
    from isp_gateway.auth import keys

    try:
        entries = keys.read_key_entries(path)
    except keys.KeyFileError as exc:
        print(f"isp-gateway: API_KEYS_FILE {exc}", file=sys.stderr)
        return 1
    if not entries:
        print(f"no API keys in {path}")
        return 0
    rows = [
        (
            e["name"],
            ",".join(e["scopes"]),
            str(e["rate_per_minute"]) if e.get("rate_per_minute") else "-",
            e["created_at"],
        )
        for e in entries
    ]
    header = ("NAME", "SCOPES", "RATE/MIN", "CREATED")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
            + "  "
            + row[3]
        )
    return 0


def _valid_create_or_none(ns: argparse.Namespace) -> list[str] | None:
    """The scopes of a valid `keys create`, else None once the problem is printed (checked
    before the file is locked or read)."""
    from isp_gateway.auth import keys

    if not keys.NAME_PATTERN.fullmatch(ns.name):
        print(
            f"isp-gateway: invalid key name {ns.name!r}: 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit",
            file=sys.stderr,
        )
        return None
    scopes = [part.strip() for part in ns.scopes.split(",") if part.strip()]
    unknown = [scope for scope in scopes if scope not in keys.KNOWN_SCOPES]
    if not scopes or unknown:
        problem = f"unknown scope {', '.join(unknown)}" if unknown else "no scope given"
        choices = ", ".join((*keys.SCOPES, keys.ALL_SCOPES))
        print(f"isp-gateway: {problem}; choose from {choices}", file=sys.stderr)
        return None
    if ns.rate_per_minute is not None and ns.rate_per_minute < 1:
        print("isp-gateway: --rate-per-minute must be at least 1", file=sys.stderr)
        return None
    return scopes


def _write(path: Any, entries: list[dict[str, Any]]) -> bool:
    """Replace the file with `entries`; False once a failure is printed. Warns when the new
    file's owner is not the old one's (run as another user than the file's, without the
    right to give it away): the service may then be unable to read it."""
    from isp_gateway.auth import keys

    try:
        before = path.stat()
    except OSError:
        before = None
    try:
        keys.write_key_entries(path, entries)
    except OSError as exc:
        print(f"isp-gateway: cannot write {path} ({type(exc).__name__})", file=sys.stderr)
        return False
    after = path.stat()
    if before is not None and (before.st_uid, before.st_gid) != (after.st_uid, after.st_gid):
        print(
            f"isp-gateway: warning: {path} now belongs to uid {after.st_uid} gid "
            f"{after.st_gid} (it belonged to uid {before.st_uid} gid {before.st_gid}); run "
            "keys commands as the file's owner or root, or the service may not read it",
            file=sys.stderr,
        )
    return True


def _revoke(path: Any, entries: list[dict[str, Any]], name: str) -> int:
    if name not in [e["name"] for e in entries]:
        print(f"isp-gateway: no API key named {name!r} in {path}", file=sys.stderr)
        return EXIT_CONFIG
    if not _write(path, [e for e in entries if e["name"] != name]):
        return 1
    print(f"revoked {name}; running services stop accepting it within 5 s")
    return 0


def _create(
    path: Any,
    entries: list[dict[str, Any]],
    name: str,
    scopes: list[str],
    rate_per_minute: int | None,
) -> int:
    from isp_gateway.auth import keys

    if name in [e["name"] for e in entries]:
        print(
            f"isp-gateway: an API key named {name!r} already exists; revoke it first or "
            "choose another name",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    key = keys.generate_key()
    entry = keys.new_entry(key, name, scopes, rate_per_minute)
    if not _write(path, [*entries, entry]):
        return 1
    print(key)
    print(
        f"(API key {name!r} created; this is the only time it is shown. Send it as "
        "X-API-Key or Authorization: Bearer.)",
        file=sys.stderr,
    )
    return 0
