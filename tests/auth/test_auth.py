"""JWT Bearer auth (spec 5.1, 7): which tokens pass and which answer 401. The token
endpoint that issues them is tested in test_login.py."""

from __future__ import annotations

import base64
import json
import time
import warnings
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import jwt
import pytest
from jwt.warnings import InsecureKeyLengthWarning

from isp_gateway.auth.tokens import issue_token
from tests.auth.conftest import WHOAMI, StartProbe, bearer
from tests.conftest import JWT_SECRET, USERNAME, Gateway

CREDENTIALS = {"detail": "Could not validate credentials."}


def _b64(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _claims(**extra: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"sub": USERNAME, "iat": now, "exp": now + 600, **extra}


def assert_unauthorized(response: httpx.Response) -> None:
    assert response.status_code == 401
    assert response.json() == CREDENTIALS
    assert response.headers["www-authenticate"] == "Bearer"


def test_valid_token_passes(gw: Gateway) -> None:
    response = gw.get(WHOAMI)
    assert response.status_code == 200
    assert response.json() == {"sub": USERNAME}


def test_missing_header(gw: Gateway) -> None:
    assert_unauthorized(gw.client.get(WHOAMI))


@pytest.mark.parametrize(
    "header",
    [
        "Basic Ym90OnBhc3N3b3Jk",
        "Bearer",
        "Bearer not-a-jwt",
        "Bearer a.b.c",
        "Token abc",
        "bearerabc",
    ],
)
def test_malformed_or_wrong_scheme(gw: Gateway, header: str) -> None:
    assert_unauthorized(gw.client.get(WHOAMI, headers={"Authorization": header}))


def test_bad_signature(gw: Gateway) -> None:
    forged = jwt.encode(_claims(), "another-secret-that-is-long-enough-000000", algorithm="HS256")
    assert_unauthorized(bearer(gw, forged))


def test_tampered_payload(gw: Gateway) -> None:
    header, _, signature = gw.token.split(".")
    tampered = f"{header}.{_b64(_claims(sub='admin'))}.{signature}"
    assert_unauthorized(bearer(gw, tampered))


def test_expired(gw: Gateway) -> None:
    old = issue_token(gw.settings, USERNAME, now=datetime.now(UTC) - timedelta(hours=2))
    assert_unauthorized(bearer(gw, old))


def test_expired_just_now(gw: Gateway) -> None:
    now = int(time.time())
    token = jwt.encode(
        {"sub": USERNAME, "iat": now - 100, "exp": now - 2}, JWT_SECRET, algorithm="HS256"
    )
    assert_unauthorized(bearer(gw, token))


def test_alg_none(gw: Gateway) -> None:
    token = f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(_claims())}."
    assert_unauthorized(bearer(gw, token))
    # Same with an unchanged signature left in place.
    signature = gw.token.split(".")[2]
    assert_unauthorized(
        bearer(gw, f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(_claims())}.{signature}")
    )


@pytest.mark.parametrize("alg", ["HS384", "HS512"])
def test_other_hmac_algorithm_than_configured(gw: Gateway, alg: str) -> None:
    assert gw.settings.JWT_ALGORITHM == "HS256"
    with warnings.catch_warnings():
        # PyJWT warns that the test secret is short for HS384/HS512; that is the point.
        warnings.simplefilter("ignore", InsecureKeyLengthWarning)
        token = jwt.encode(_claims(), JWT_SECRET, algorithm=alg)
    assert_unauthorized(bearer(gw, token))


def test_configured_algorithm_is_pinned(start_probe_gateway: StartProbe) -> None:
    secret = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
    gw = start_probe_gateway(JWT_ALGORITHM="HS512", JWT_SECRET_KEY=secret)
    assert gw.get(WHOAMI).status_code == 200
    assert jwt.get_unverified_header(gw.token)["alg"] == "HS512"
    assert_unauthorized(bearer(gw, jwt.encode(_claims(), secret, algorithm="HS256")))


def test_missing_sub(gw: Gateway) -> None:
    claims = _claims()
    del claims["sub"]
    assert_unauthorized(bearer(gw, jwt.encode(claims, JWT_SECRET, algorithm="HS256")))


def test_missing_exp(gw: Gateway) -> None:
    claims = _claims()
    del claims["exp"]
    assert_unauthorized(bearer(gw, jwt.encode(claims, JWT_SECRET, algorithm="HS256")))


def test_wrong_sub(gw: Gateway) -> None:
    token = jwt.encode(_claims(sub="someone-else"), JWT_SECRET, algorithm="HS256")
    assert_unauthorized(bearer(gw, token))
