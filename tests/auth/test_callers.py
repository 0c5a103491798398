"""The caller, resolved once where the bearer token is checked (CALLERS.md 1): `jwt:<sub>`,
the end user from X-End-User-Id (else the caller), the address after trusted proxy headers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import pytest
from fastapi import APIRouter, Depends, FastAPI

from isp_gateway.auth.dependencies import CurrentCaller
from isp_gateway.auth.dependencies import current_caller as authenticated_caller
from isp_gateway.kit.callers import current_caller
from tests.conftest import USERNAME, Gateway, _start_gateway

WHO = "/api/v1/_callers/who"
CALLER = f"jwt:{USERNAME}"


def add_caller_route(app: FastAPI) -> None:
    router = APIRouter(prefix="/api/v1/_callers", dependencies=[Depends(authenticated_caller)])

    async def far_below() -> dict[str, Any] | None:
        # What code far below the routers (the upstream budget) sees.
        seen = current_caller()
        return asdict(seen) if seen is not None else None

    @router.get("/who")
    async def who(caller: CurrentCaller) -> dict[str, Any]:
        return {"caller": asdict(caller), "context": await far_below()}

    app.include_router(router)


@pytest.fixture(scope="module")
def gw(password_hash: str) -> Iterator[Gateway]:
    with contextlib.ExitStack() as stack:
        yield _start_gateway(stack, password_hash, "http://127.0.0.1:9", prepare=add_caller_route)


def test_without_the_header_the_end_user_is_the_caller(gw: Gateway) -> None:
    response = gw.get(WHO)
    assert response.status_code == 200
    expected = {"caller": CALLER, "end_user": CALLER, "address": "127.0.0.1", "scopes": ["*"]}
    assert response.json() == {"caller": expected, "context": expected}


def test_the_header_names_the_end_user_and_proxies_the_address(gw: Gateway) -> None:
    end_user = "wa:5f2b9c" + "x" * 119  # 128 characters, the most allowed
    headers = {"X-End-User-Id": end_user, "X-Forwarded-For": "203.0.113.5"}
    response = gw.get(WHO, headers=headers)
    assert response.status_code == 200
    expected = {"caller": CALLER, "end_user": end_user, "address": "203.0.113.5", "scopes": ["*"]}
    assert response.json() == {"caller": expected, "context": expected}
    # Printable ASCII includes spaces and symbols: opaque to us.
    assert gw.get(WHO, headers={"X-End-User-Id": "a b:c/d=~"}).status_code == 200


BAD_END_USERS: list[str | bytes] = ["x" * 129, "", "tab\there", b"caf\xc3\xa9", b"\xff"]


@pytest.mark.parametrize("value", BAD_END_USERS, ids=["long", "empty", "tab", "utf8", "latin1"])
def test_a_bad_end_user_is_422_in_the_envelope(gw: Gateway, value: str | bytes) -> None:
    response = gw.get(WHO, headers={"X-End-User-Id": value})  # type: ignore[dict-item]
    assert response.status_code == 422
    out = response.json()
    assert (out["ok"], out["action"]) == (False, "validation_error")
    assert out["meta"]["errors"] == [
        {"field": "header.X-End-User-Id", "message": out["meta"]["errors"][0]["message"]}
    ]
    assert "printable ASCII" in out["message"]
    raw = value if isinstance(value, str) else value.decode("latin-1")
    if raw:
        assert raw not in response.text  # never echoed


def test_an_anonymous_request_is_401_whatever_its_end_user(gw: Gateway) -> None:
    for value in ("someone", "x" * 500):
        response = gw.client.get(WHO, headers={"X-End-User-Id": value})
        assert response.status_code == 401
        assert response.json() == {"detail": "Could not validate credentials."}


def test_openapi_declares_the_header_on_protected_operations(gw: Gateway) -> None:
    spec = gw.client.get("/openapi.json").json()
    operation = spec["paths"]["/api/v1/clients/{service_id}/verify"]["post"]
    (header,) = [p for p in operation["parameters"] if p["name"] == "X-End-User-Id"]
    assert header["in"] == "header" and header["required"] is False
    assert header["schema"].get("maxLength") == 128 or "128" in header["description"]
    token = spec["paths"]["/api/v1/auth/token"]["post"]
    assert all(p["name"] != "X-End-User-Id" for p in token.get("parameters", []))
