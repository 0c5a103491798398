"""JWT Bearer auth (spec 5.1, 7) and the token endpoint (spec 4.2, DECISIONS.md auth rules)."""

from __future__ import annotations

import base64
import json
import statistics
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import bcrypt
import httpx
import jwt
import pytest
from jwt.warnings import InsecureKeyLengthWarning

from isp_gateway.auth.passwords import dummy_hash
from isp_gateway.auth.tokens import issue_token
from tests.conftest import JWT_SECRET, PASSWORD, USERNAME, Gateway

CREDENTIALS = {"detail": "Could not validate credentials."}
WHOAMI = "/api/v1/_probe/whoami"
TOKEN = "/api/v1/auth/token"

StartProbe = Callable[..., Gateway]


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


@pytest.fixture
def gw(probe_gateway: Gateway) -> Gateway:
    return probe_gateway


@pytest.fixture
def fast_hash() -> str:
    """A cheap bcrypt hash (cost 4) for tests that log in many times."""
    return bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()


def login(client: httpx.Client, username: str = USERNAME, password: str = PASSWORD) -> Any:
    return client.post(TOKEN, data={"username": username, "password": password})


# -- Bearer tokens ---------------------------------------------------------------------------


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


def _bearer(gw: Gateway, token: str) -> httpx.Response:
    return gw.client.get(WHOAMI, headers={"Authorization": f"Bearer {token}"})


def test_bad_signature(gw: Gateway) -> None:
    forged = jwt.encode(_claims(), "another-secret-that-is-long-enough-000000", algorithm="HS256")
    assert_unauthorized(_bearer(gw, forged))


def test_tampered_payload(gw: Gateway) -> None:
    header, _, signature = gw.token.split(".")
    tampered = f"{header}.{_b64(_claims(sub='admin'))}.{signature}"
    assert_unauthorized(_bearer(gw, tampered))


def test_expired(gw: Gateway) -> None:
    old = issue_token(gw.settings, USERNAME, now=datetime.now(UTC) - timedelta(hours=2))
    assert_unauthorized(_bearer(gw, old))


def test_expired_just_now(gw: Gateway) -> None:
    now = int(time.time())
    token = jwt.encode(
        {"sub": USERNAME, "iat": now - 100, "exp": now - 2}, JWT_SECRET, algorithm="HS256"
    )
    assert_unauthorized(_bearer(gw, token))


def test_alg_none(gw: Gateway) -> None:
    token = f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(_claims())}."
    assert_unauthorized(_bearer(gw, token))
    # Same with an unchanged signature left in place.
    signature = gw.token.split(".")[2]
    assert_unauthorized(
        _bearer(gw, f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(_claims())}.{signature}")
    )


@pytest.mark.parametrize("alg", ["HS384", "HS512"])
def test_other_hmac_algorithm_than_configured(gw: Gateway, alg: str) -> None:
    assert gw.settings.JWT_ALGORITHM == "HS256"
    with warnings.catch_warnings():
        # PyJWT warns that the test secret is short for HS384/HS512; that is the point.
        warnings.simplefilter("ignore", InsecureKeyLengthWarning)
        token = jwt.encode(_claims(), JWT_SECRET, algorithm=alg)
    assert_unauthorized(_bearer(gw, token))


def test_configured_algorithm_is_pinned(start_probe_gateway: StartProbe) -> None:
    secret = "s" * 64
    gw = start_probe_gateway(JWT_ALGORITHM="HS512", JWT_SECRET_KEY=secret)
    assert gw.get(WHOAMI).status_code == 200
    assert jwt.get_unverified_header(gw.token)["alg"] == "HS512"
    assert_unauthorized(_bearer(gw, jwt.encode(_claims(), secret, algorithm="HS256")))


def test_missing_sub(gw: Gateway) -> None:
    claims = _claims()
    del claims["sub"]
    assert_unauthorized(_bearer(gw, jwt.encode(claims, JWT_SECRET, algorithm="HS256")))


def test_missing_exp(gw: Gateway) -> None:
    claims = _claims()
    del claims["exp"]
    assert_unauthorized(_bearer(gw, jwt.encode(claims, JWT_SECRET, algorithm="HS256")))


def test_wrong_sub(gw: Gateway) -> None:
    token = jwt.encode(_claims(sub="someone-else"), JWT_SECRET, algorithm="HS256")
    assert_unauthorized(_bearer(gw, token))


# -- Token endpoint ----------------------------------------------------------------------------


def test_login_issues_a_working_token_with_sub_iat_exp(start_probe_gateway: StartProbe) -> None:
    gw = start_probe_gateway(JWT_ACCESS_TOKEN_EXPIRE_MINUTES=5)
    response = login(gw.client)
    assert response.status_code == 200
    body = response.json()
    assert body["token_type"] == "bearer"
    assert set(body) == {"access_token", "token_type"}
    token = body["access_token"]
    assert jwt.get_unverified_header(token)["alg"] == "HS256"
    claims = jwt.decode(token, JWT_SECRET, algorithms=["HS256"])
    assert claims["sub"] == USERNAME
    assert claims["exp"] - claims["iat"] == 5 * 60
    assert abs(claims["iat"] - time.time()) < 30
    assert _bearer(gw, token).json() == {"sub": USERNAME}


def test_login_as_the_docs_authorize_button_sends_it(start_probe_gateway: StartProbe) -> None:
    # Swagger UI's password flow: grant_type and an empty scope ride along with the form.
    gw = start_probe_gateway()
    form = {"grant_type": "password", "username": USERNAME, "password": PASSWORD, "scope": ""}
    response = gw.client.post(TOKEN, data=form)
    assert response.status_code == 200, response.text
    assert _bearer(gw, response.json()["access_token"]).json() == {"sub": USERNAME}


def test_login_json_body_is_refused(gw: Gateway) -> None:
    response = gw.client.post(TOKEN, json={"username": USERNAME, "password": PASSWORD})
    assert response.status_code == 422
    assert "access_token" not in response.text
    assert "detail" in response.json()


def test_login_missing_field(gw: Gateway) -> None:
    response = gw.client.post(TOKEN, data={"username": USERNAME})
    assert response.status_code == 422
    assert "access_token" not in response.text


@pytest.mark.parametrize(
    ("username", "password"),
    [(USERNAME, "wrong password"), ("nobody", PASSWORD), (USERNAME.upper(), PASSWORD), ("", "")],
)
def test_login_wrong_credentials(
    start_probe_gateway: StartProbe, fast_hash: str, username: str, password: str
) -> None:
    gw = start_probe_gateway(API_PASSWORD_HASH=fast_hash)
    response = login(gw.client, username, password)
    if username == "":
        # An empty form field is a missing one for FastAPI's Form().
        assert response.status_code in (401, 422)
        assert "access_token" not in response.text
        return
    assert response.status_code == 401
    assert response.json() == {"detail": "Incorrect username or password."}


def _client_from(gw: Gateway, address: str) -> httpx.Client:
    """A client whose connections come from another loopback address (127.0.0.0/8)."""
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=gw.url, transport=transport, timeout=30)


def _assert_throttled(response: httpx.Response) -> None:
    assert response.status_code == 429
    assert response.json() == {"detail": "Too many failed login attempts."}
    assert int(response.headers["retry-after"]) >= 1


def test_throttle_per_username(start_probe_gateway: StartProbe, fast_hash: str) -> None:
    gw = start_probe_gateway(
        API_PASSWORD_HASH=fast_hash, LOGIN_MAX_FAILURES=3, LOGIN_LOCKOUT_SECONDS=60
    )
    # Three failures for one username, each from its own address: no address is throttled.
    for n in range(3):
        with _client_from(gw, f"127.0.0.{10 + n}") as client:
            assert login(client, password="wrong").status_code == 401
    with _client_from(gw, "127.0.0.20") as client:
        _assert_throttled(login(client))  # even the right password waits
        retry = int(login(client).headers["retry-after"])
        assert 1 <= retry <= 60
        # Another username from the same fresh address is not affected.
        assert login(client, "other", "x").status_code == 401


def test_throttle_per_address(start_probe_gateway: StartProbe, fast_hash: str) -> None:
    gw = start_probe_gateway(
        API_PASSWORD_HASH=fast_hash, LOGIN_MAX_FAILURES=3, LOGIN_LOCKOUT_SECONDS=60
    )
    with _client_from(gw, "127.0.0.30") as client:
        for n in range(3):
            assert login(client, f"guess{n}", "wrong").status_code == 401
        _assert_throttled(login(client))
    with _client_from(gw, "127.0.0.31") as client:
        assert login(client).status_code == 200


def test_success_resets_the_throttle(start_probe_gateway: StartProbe, fast_hash: str) -> None:
    gw = start_probe_gateway(API_PASSWORD_HASH=fast_hash, LOGIN_MAX_FAILURES=3)
    for _ in range(2):
        for _ in range(2):
            assert login(gw.client, password="wrong").status_code == 401
        assert login(gw.client).status_code == 200
    # 4 failures in total, but never 3 since the last success.
    assert login(gw.client, password="wrong").status_code == 401


def test_throttle_window_expires(start_probe_gateway: StartProbe, fast_hash: str) -> None:
    gw = start_probe_gateway(
        API_PASSWORD_HASH=fast_hash, LOGIN_MAX_FAILURES=2, LOGIN_LOCKOUT_SECONDS=1
    )
    for _ in range(2):
        assert login(gw.client, password="wrong").status_code == 401
    _assert_throttled(login(gw.client))
    time.sleep(1.2)
    assert login(gw.client).status_code == 200


def _median_seconds(client: httpx.Client, username: str, password: str, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        assert login(client, username, password).status_code == 401
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def test_unknown_user_costs_a_bcrypt_check(
    start_probe_gateway: StartProbe, password_hash: str
) -> None:
    gw = start_probe_gateway(LOGIN_MAX_FAILURES=100)
    # The configured hash is cost 12 (tens of ms at least). An unknown user must take bcrypt
    # time too, or timing tells which usernames exist.
    assert password_hash.startswith("$2b$12$")
    wrong_password = _median_seconds(gw.client, USERNAME, "wrong")
    unknown_user = _median_seconds(gw.client, "nobody-here", "wrong")
    assert wrong_password >= 0.02
    assert unknown_user >= 0.02
    assert unknown_user >= wrong_password / 4


def test_dummy_hash_matches_the_configured_cost(fast_hash: str, password_hash: str) -> None:
    # Same cost, same time: a cost-12 dummy against a cost-4 real hash would expose users.
    assert dummy_hash(fast_hash).startswith("$2b$04$")
    assert dummy_hash(password_hash).startswith("$2b$12$")
    assert dummy_hash("not a bcrypt hash").startswith("$2b$12$")


def test_unknown_user_timing_with_a_cheap_hash(
    start_probe_gateway: StartProbe, fast_hash: str
) -> None:
    gw = start_probe_gateway(API_PASSWORD_HASH=fast_hash, LOGIN_MAX_FAILURES=100)
    login(gw.client, "warm-up", "x")
    wrong_password = _median_seconds(gw.client, USERNAME, "wrong", runs=5)
    unknown_user = _median_seconds(gw.client, "nobody-here", "wrong", runs=5)
    # A cost-12 dummy would take ~100x longer than the cost-4 check.
    assert unknown_user < wrong_password * 5 + 0.05


def test_throttle_holds_under_concurrent_guesses(
    start_probe_gateway: StartProbe, password_hash: str
) -> None:
    # A guesser firing in parallel must not get more than LOGIN_MAX_FAILURES password checks
    # per window: each attempt takes its place in the count before the (slow) bcrypt check.
    gw = start_probe_gateway(LOGIN_MAX_FAILURES=3, LOGIN_LOCKOUT_SECONDS=60)

    def guess(n: int) -> int:
        with httpx.Client(base_url=gw.url, timeout=30) as client:
            return int(login(client, password=f"guess-{n}").status_code)

    with ThreadPoolExecutor(max_workers=12) as pool:
        statuses = list(pool.map(guess, range(12)))
    assert statuses.count(401) == 3, statuses
    assert statuses.count(429) == 9, statuses
