"""What the tests of the bearer tokens and of the token endpoint share: the probe gateway,
a cheap password hash, and a login and a bearer request."""

from __future__ import annotations

from typing import Any

import bcrypt
import httpx
import pytest

from tests.conftest import PASSWORD, USERNAME, Gateway, StartGateway

WHOAMI = "/api/v1/_probe/whoami"
TOKEN = "/api/v1/auth/token"

StartProbe = StartGateway


@pytest.fixture
def gw(probe_gateway: Gateway) -> Gateway:
    return probe_gateway


@pytest.fixture
def fast_hash() -> str:
    """A cheap bcrypt hash (cost 4) for tests that log in many times."""
    return bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()


def login(client: httpx.Client, username: str = USERNAME, password: str = PASSWORD) -> Any:
    return client.post(TOKEN, data={"username": username, "password": password})


def bearer(gw: Gateway, token: str) -> httpx.Response:
    """The probe route, asked with `token` as the bearer."""
    return gw.client.get(WHOAMI, headers={"Authorization": f"Bearer {token}"})
