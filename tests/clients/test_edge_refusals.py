"""CALLERS.md 6 "The cost of refusing": a lookup with a bad or missing credential is refused
at the lookup edge, before FastAPI's routing and exception handling, with the regular
route's 401 byte for byte (body, `WWW-Authenticate`, content type)."""

from __future__ import annotations

import pytest

from tests.conftest import Gateway


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer not-a-valid-token"},
        {"Authorization": "Bearer " + "e30." * 2 + "c2ln"},  # well formed, bad signature
        {"X-API-Key": "igw_" + "A" * 43},
        {},
    ],
)
def test_a_refused_lookup_answers_as_the_regular_route(
    gateway: Gateway, headers: dict[str, str]
) -> None:
    lookup = gateway.client.get("/api/v1/clients/by-document/12345678", headers=headers)
    regular = gateway.client.get("/api/v1/clients/", headers=headers)
    assert lookup.status_code == regular.status_code == 401
    assert lookup.content == regular.content == b'{"detail":"Could not validate credentials."}'
    for name in ("www-authenticate", "content-type"):
        assert lookup.headers[name] == regular.headers[name]
    assert lookup.headers["x-request-id"]
