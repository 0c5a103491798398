"""The lookup edge with API keys (CALLERS.md 3): a current key holding clients:read is
served there like a verified JWT, within its own rate; anything else falls through to the
full stack, which answers 401, 403 or 429."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from isp_gateway.auth.keys import generate_key, new_entry, write_key_entries
from tests.clients.conftest import StartPair, calls, lookup_edge
from tests.support import wait_for_fresh_window, wait_until

HIT = "/api/v1/clients/by-document/12345678"
MISS = "/api/v1/clients/by-document/424242"


def key_file(tmp_path: Path) -> tuple[Path, dict[str, str], list[dict[str, Any]]]:
    made = {name: generate_key() for name in ("reader", "planner", "capped")}
    entries = [
        new_entry(made["reader"], "reader", ["clients:read"], None),
        new_entry(made["planner"], "planner", ["plans:read"], None),
        new_entry(made["capped"], "capped", ["clients:read"], 2),
    ]
    path = tmp_path / "keys.json"
    write_key_entries(path, entries)
    return path, made, entries


def test_only_a_current_key_with_the_scope_is_served_at_the_edge(
    start_pair: StartPair, tmp_path: Path
) -> None:
    path, made, _ = key_file(tmp_path)
    _, gw = start_pair(API_KEYS_FILE=str(path))
    assert gw.get(HIT).status_code == 200  # gw.token is verified and cached
    passed: list[str] = []

    async def regular(scope: Any, receive: Any, send: Any) -> None:
        passed.append(scope["path"])
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    transport = httpx.ASGITransport(app=lookup_edge(regular, gw))

    async def fetch(target: str, headers: dict[str, str]) -> int:
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return (await client.get(target, headers=headers)).status_code

    async def scenario() -> dict[str, int]:
        reader = made["reader"]
        return {
            "x-api-key": await fetch(HIT, {"X-API-Key": reader}),
            "bearer key": await fetch(HIT, {"Authorization": f"Bearer {reader}"}),
            "miss": await fetch(MISS, {"X-API-Key": reader}),
            "no scope": await fetch(HIT, {"X-API-Key": made["planner"]}),
            "unknown key": await fetch(HIT, {"X-API-Key": generate_key()}),
            "unknown bearer key": await fetch(HIT, {"Authorization": f"Bearer {generate_key()}"}),
            # A bad key beside a verified JWT is a key request: never served on the JWT.
            "bad key and jwt": await fetch(HIT, {"X-API-Key": "igw_x", **gw.auth}),
        }

    status = asyncio.run(scenario())
    assert status["x-api-key"] == status["bearer key"] == 200
    # An unknown key is refused at the edge, with the regular route's 401 (CALLERS.md 6
    # "The cost of refusing"): never served, whatever JWT stands beside it.
    for case in ("unknown key", "unknown bearer key", "bad key and jwt"):
        assert status[case] == 401, case
    for case in ("miss", "no scope"):
        assert status[case] == 299, case
    assert len(passed) == 2


def test_keys_on_the_lookups_of_the_real_app(start_pair: StartPair, tmp_path: Path) -> None:
    path, made, entries = key_file(tmp_path)
    sim, gw = start_pair(API_KEYS_FILE=str(path))
    by_jwt = gw.get(HIT)
    assert by_jwt.status_code == 200
    for _ in range(3):  # the first through the full stack, the next at the edge
        by_key = gw.client.get(HIT, headers={"X-API-Key": made["reader"]})
        assert by_key.status_code == 200
        assert by_key.content == by_jwt.content
    # Without the scope: 403 every time, however warm the lookup is.
    for _ in range(3):
        refused = gw.client.get(HIT, headers={"X-API-Key": made["planner"]})
        assert refused.status_code == 403
        assert refused.json()["data"] == {"required": "clients:read"}
    # The key's own rate holds at the edge too.
    wait_for_fresh_window(60, margin=5)
    capped = {"X-API-Key": made["capped"]}
    assert [gw.client.get(HIT, headers=capped).status_code for _ in range(4)] == [
        200,
        200,
        429,
        429,
    ]
    assert gw.client.get(HIT, headers=capped).json()["action"] == "rate_limited"
    # Revoked: the edge stops serving it within 5 s.
    write_key_entries(path, [e for e in entries if e["name"] != "reader"])
    wait_until(
        lambda: gw.client.get(HIT, headers={"X-API-Key": made["reader"]}).status_code != 200,
        timeout=5,
        interval=0.1,
        message="the revocation to apply",
    )
    refused = gw.client.get(HIT, headers={"X-API-Key": made["reader"]})
    assert refused.status_code == 401
    assert refused.json() == {"detail": "Could not validate credentials."}
    assert calls(sim) == 0
