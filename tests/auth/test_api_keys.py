"""API keys (CALLERS.md 3): the key ring a service looks keys up in, the header helper and
the scope check. The file is a real file in a temp dir, written by the same functions the
CLI uses; the clock of the re-check is the real one (a short interval)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI, HTTPException, Request
from starlette.datastructures import Headers

from isp_gateway.auth import keys
from isp_gateway.auth.keys import (
    ApiKey,
    InsufficientScope,
    KeyRing,
    enforce_key_rate,
    generate_key,
    key_digest,
    new_entry,
    presented_key,
    require_scope,
    write_key_entries,
)
from isp_gateway.kit.errors import Locked
from isp_gateway.store import Store
from tests.conftest import StartGateway
from tests.support import RUN, memory_or_redis, wait_until

INTERVAL = 0.05  # the ring's re-check interval in these tests


def write(path: Path, *entries: dict[str, object]) -> None:
    write_key_entries(path, list(entries))


def bot_ring(path: Path, check_interval: float = INTERVAL) -> tuple[KeyRing, str]:
    """A key file at `path` holding one key, "bot", with every scope; its ring and the key."""
    key = generate_key()
    write(path, new_entry(key, "bot", ["*"], None))
    return KeyRing(path, check_interval=check_interval), key


def wait_past_interval() -> None:
    """Real time for the ring to look at its file again, for what must NOT change then
    (what must change is waited for: `wait_until`)."""
    time.sleep(INTERVAL * 2)


def test_key_format() -> None:
    key = generate_key()
    assert keys.KEY_PATTERN.fullmatch(key)
    assert len(key) == 4 + 43
    assert generate_key() != key


def test_lookup_by_digest_and_the_file_never_holds_the_key(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    key = generate_key()
    write(path, new_entry(key, "whatsapp", ["clients:read"], 60))
    text = path.read_text()
    assert key not in text
    assert key_digest(key) in text
    ring = KeyRing(path, check_interval=INTERVAL)
    found = ring.lookup(key)
    assert found is not None
    assert found == ApiKey("whatsapp", frozenset({"clients:read"}), 60, found.created_at)
    assert found.created_at.endswith("Z")
    assert found.allows("clients:read") and not found.allows("clients:write")
    assert key not in repr(found) and key_digest(key) not in repr(found)


@pytest.mark.parametrize(
    "attempt",
    [
        lambda key: key[:-1] + ("A" if key[-1] != "A" else "B"),  # one character changed
        lambda key: key + "x",  # one too many
        lambda key: key[:-1],  # one too few
        lambda key: key.upper(),
        lambda key: " " + key,
        lambda key: key_digest(key),  # the digest itself is not a key
        lambda key: "igw_" + "A" * 43,
        lambda key: "",
    ],
)
def test_anything_but_the_key_is_refused(tmp_path: Path, attempt: object) -> None:
    path = tmp_path / "keys.json"
    ring, key = bot_ring(path)
    assert ring.lookup(key) is not None
    assert callable(attempt)
    assert ring.lookup(attempt(key)) is None


def test_keys_off_without_a_file_setting() -> None:
    ring = KeyRing(None)
    assert not ring.enabled
    assert ring.lookup(generate_key()) is None


def test_a_file_that_does_not_exist_yet_holds_no_keys_then_its_keys_apply(
    tmp_path: Path,
) -> None:
    path = tmp_path / "later.json"
    ring = KeyRing(path, check_interval=INTERVAL)
    key = generate_key()
    assert ring.lookup(key) is None
    write(path, new_entry(key, "portal", ["plans:read"], None))
    wait_until(lambda: ring.lookup(key), message="the new key to apply")
    assert ring.lookup(key) is not None


def test_a_revoked_key_stops_even_when_cached(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    kept, revoked = generate_key(), generate_key()
    write(path, new_entry(kept, "kept", ["*"], None), new_entry(revoked, "gone", ["*"], None))
    ring = KeyRing(path, check_interval=INTERVAL)
    for _ in range(5):  # in the cache now
        assert ring.lookup(revoked) is not None
    write(path, new_entry(kept, "kept", ["*"], None))
    wait_until(lambda: ring.lookup(revoked) is None, message="the revocation to apply")
    assert ring.lookup(revoked) is None
    assert ring.lookup(kept) is not None


def test_a_same_size_rewrite_in_place_is_seen(tmp_path: Path) -> None:
    # An editor that rewrites the file in place (same inode, same size): mtime tells.
    path = tmp_path / "keys.json"
    key = generate_key()
    entry = new_entry(key, "aaaa", ["*"], None)
    write(path, entry)
    ring = KeyRing(path, check_interval=INTERVAL)
    assert ring.lookup(key) is not None
    other = dict(entry, sha256=key_digest(generate_key()))
    time.sleep(0.01)  # real time, so that the rewrite's mtime differs from the write's
    with path.open("r+") as handle:  # same length: only the digest changes
        handle.write(json.dumps({"version": 1, "keys": [other]}, indent=2) + "\n")
    wait_until(lambda: ring.lookup(key) is None, message="the rewrite to be seen")
    assert ring.lookup(key) is None


def test_the_file_is_looked_at_at_most_once_per_interval(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    ring, key = bot_ring(path, check_interval=60)
    assert ring.lookup(key) is not None
    path.unlink()  # not seen until the next check, a minute away
    for _ in range(100):
        assert ring.lookup(key) is not None
    ring.refresh()
    assert ring.lookup(key) is None  # a deleted file holds no keys


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[]",
        '{"keys": {}}',
        '{"keys": [{"name": "x"}]}',
        '{"keys": [{"name": "bad:name", "sha256": "' + "0" * 64 + '", "scopes": ["*"],'
        ' "created_at": "t"}]}',
        '{"keys": [{"name": "x", "sha256": "' + "0" * 64 + '", "scopes": ["root"],'
        ' "created_at": "t"}]}',
        "\udcff",  # not UTF-8 on disk
    ],
)
def test_a_broken_file_keeps_the_last_good_keys_and_logs_once(
    tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "keys.json"
    ring, key = bot_ring(path)
    assert ring.lookup(key) is not None
    if content == "\udcff":
        path.write_bytes(b'{"keys": [\xff]}')
    else:
        path.write_text(content)
    caplog.set_level(logging.INFO, logger="isp_gateway")
    for _ in range(5):
        wait_past_interval()
        assert ring.lookup(key) is not None  # the last good keys
        assert ring.lookup(generate_key()) is None
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    message = errors[0].getMessage()
    assert str(path) in message
    assert key not in message and key_digest(key) not in message
    # Fixed: the new keys apply.
    fresh = generate_key()
    write(path, new_entry(fresh, "fresh", ["*"], None))
    wait_until(lambda: ring.lookup(fresh), message="the fixed file to apply")
    assert ring.lookup(fresh) is not None
    assert ring.lookup(key) is None


def test_an_unreadable_file_keeps_the_last_good_keys(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A path that cannot be read as a file (here a directory in its place; a mode the
    # service's user may not read behaves alike, but the tests may run as root).
    path = tmp_path / "keys.json"
    ring, key = bot_ring(path)
    assert ring.lookup(key) is not None
    path.unlink()
    path.mkdir()
    caplog.set_level(logging.INFO, logger="isp_gateway")
    for _ in range(3):
        wait_past_interval()
        assert ring.lookup(key) is not None
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert str(path) in errors[0].getMessage()


def test_the_cache_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    many = [generate_key() for _ in range(20)]
    write(path, *(new_entry(key, f"k{i}", ["*"], None) for i, key in enumerate(many)))
    ring = KeyRing(path, check_interval=INTERVAL, cache_size=8)
    for key in many * 3:
        assert ring.lookup(key) is not None
        assert len(ring._cache) <= 8


# -- the header helper -------------------------------------------------------------------------


def test_presented_key_reads_either_header() -> None:
    key = generate_key()
    assert presented_key(Headers({"X-API-Key": key})) == key
    assert presented_key(Headers({"authorization": f"Bearer {key}"})) == key
    assert presented_key(Headers({"Authorization": f"bearer  {key} "})) == key
    assert presented_key([(b"x-api-key", key.encode())]) == key
    assert presented_key([(b"authorization", f"Bearer {key}".encode())]) == key


def test_a_jwt_or_nothing_is_not_a_key() -> None:
    jwt_like = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib3QifQ.sig"
    assert presented_key(Headers({"Authorization": f"Bearer {jwt_like}"})) is None
    assert presented_key(Headers({"Authorization": f"Basic {generate_key()}"})) is None
    assert presented_key(Headers({})) is None
    assert presented_key([]) is None


def test_an_x_api_key_is_always_a_key_and_wins() -> None:
    # A malformed X-API-Key is still a key attempt (401), never silently a JWT request.
    assert presented_key(Headers({"X-API-Key": "garbage"})) == "garbage"
    key = generate_key()
    both = Headers({"X-API-Key": key, "Authorization": "Bearer eyJ.x.y"})
    assert presented_key(both) == key


# -- scopes ----------------------------------------------------------------------------------


def test_scopes_and_the_star() -> None:
    assert set(keys.SCOPES) == {
        "clients:read",
        "clients:verify",
        "clients:write",
        "accounts:read",
        "tickets:read",
        "tickets:write",
        "network:ping",
        "plans:read",
        "audit:read",
        "outages:read",
        "payments:promise",
        "payments:report",
    }
    require_scope(keys.JWT_SCOPES, keys.AUDIT_READ)  # the JWT user has all
    require_scope(frozenset({"*"}), keys.TICKETS_WRITE)
    require_scope(frozenset({"tickets:write"}), keys.TICKETS_WRITE)
    for held, needed in [
        (frozenset({"tickets:read"}), keys.TICKETS_WRITE),
        (frozenset({"clients:read"}), keys.CLIENTS_VERIFY),
        (frozenset(), keys.PLANS_READ),
        (frozenset({"clients:*"}), keys.CLIENTS_WRITE),  # no wildcards but "*"
    ]:
        with pytest.raises(InsufficientScope) as caught:
            require_scope(held, needed)
        assert caught.value.status_code == 403
        assert caught.value.action == "insufficient_scope"
        assert caught.value.data == {"required": needed}


# -- a key's own rate ------------------------------------------------------------------------


@pytest.fixture(params=["memory", "redis"])
async def rate_store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    async with memory_or_redis(request, 6, f"*{RUN}*") as store:
        yield store


@pytest.mark.anyio
async def test_a_keys_rate_caps_its_own_requests_only(rate_store: Store) -> None:
    now = 1_800_000_000.0 + 10  # 10 s into a minute (a fixed clock: no window edge)
    capped = ApiKey(f"capped-{RUN}", frozenset({"*"}), 3, "t")
    other = ApiKey(f"other-{RUN}", frozenset({"*"}), 3, "t")
    free = ApiKey(f"free-{RUN}", frozenset({"*"}), None, "t")
    for _ in range(3):
        await enforce_key_rate(rate_store, capped, now=now)
    for _ in range(5):  # a loop of the same call stays refused
        with pytest.raises(Locked) as caught:
            await enforce_key_rate(rate_store, capped, now=now + 1)
        assert caught.value.status_code == 429
        assert caught.value.action == "rate_limited"
        assert caught.value.headers["Retry-After"] == "49"
    # Another key, and a key with no rate of its own, are not touched.
    for _ in range(3):
        await enforce_key_rate(rate_store, other, now=now)
    for _ in range(50):
        await enforce_key_rate(rate_store, free, now=now)
    # The next minute starts afresh.
    await enforce_key_rate(rate_store, capped, now=now + 60)


def test_a_broken_file_at_start_holds_no_keys_until_fixed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="isp_gateway")
    path = tmp_path / "keys.json"
    path.write_text('{"keys": [')
    rings = [KeyRing(path, check_interval=INTERVAL) for _ in range(2)]  # two workers
    key = generate_key()
    for _ in range(3):
        wait_past_interval()
        assert all(ring.lookup(key) is None for ring in rings)
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 2  # one each
    write(path, new_entry(key, "bot", ["*"], None))
    wait_until(lambda: all(ring.lookup(key) for ring in rings), message="the fixed file")
    assert all(ring.lookup(key) is not None for ring in rings)
    assert KeyRing(None).names() == []


# -- on the real app: what the auth dependency will do with these parts -------------------------


def add_key_probe(app: FastAPI) -> None:
    probe = APIRouter(prefix="/api/v1/_key_probe")

    @probe.get("")
    async def whoami(request: Request) -> Any:
        ring: KeyRing = request.app.state.runtime.key_ring
        presented = presented_key(request.headers)
        found = None if presented is None else ring.lookup(presented)
        if found is None:
            raise HTTPException(
                401, "Could not validate credentials.", headers={"WWW-Authenticate": "Bearer"}
            )
        require_scope(found.scopes, keys.PLANS_READ)
        return {"caller": found.name}

    app.include_router(probe)


def test_keys_on_the_real_app_and_a_revocation_within_5_s(
    tmp_path: Path, start_gateway: StartGateway
) -> None:
    path = tmp_path / "keys.json"
    reader, writer = generate_key(), generate_key()
    write(
        path,
        new_entry(reader, "portal", ["plans:read"], None),
        new_entry(writer, "ticket-bot", ["tickets:write"], None),
    )
    gw = start_gateway("http://127.0.0.1:9", prepare=add_key_probe, API_KEYS_FILE=str(path))
    url = "/api/v1/_key_probe"
    for headers in ({"X-API-Key": reader}, {"Authorization": f"Bearer {reader}"}):
        response = gw.client.get(url, headers=headers)
        assert response.status_code == 200, response.text
        assert response.json() == {"caller": "portal"}
    denied = gw.client.get(url, headers={"X-API-Key": writer})
    assert denied.status_code == 403
    body = denied.json()
    assert body["action"] == "insufficient_scope" and body["data"] == {"required": "plans:read"}
    for bad in (reader[:-1], "igw_" + "A" * 43, "", key_digest(reader)):
        response = gw.client.get(url, headers={"X-API-Key": bad})
        assert response.status_code == 401
        assert response.json() == {"detail": "Could not validate credentials."}
        assert response.headers["www-authenticate"] == "Bearer"
    write(path, new_entry(writer, "ticket-bot", ["tickets:write"], None))  # revoke "portal"
    wait_until(
        lambda: gw.client.get(url, headers={"X-API-Key": reader}).status_code != 200,
        timeout=5,
        interval=0.1,
        message="the revocation to apply",
    )
    assert gw.client.get(url, headers={"X-API-Key": reader}).status_code == 401
