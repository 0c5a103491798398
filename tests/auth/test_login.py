"""The token endpoint (spec 4.2) and its login throttle (DECISIONS.md auth rules). The
bearer tokens it issues are tested in test_auth.py."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import jwt
import pytest

from isp_gateway.auth.passwords import dummy_hash
from tests.auth.conftest import TOKEN, StartProbe, bearer, login
from tests.conftest import JWT_SECRET, PASSWORD, USERNAME, Gateway
from tests.support import emptied_redis, wait_until

REDIS_DB = 3


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
    assert bearer(gw, token).json() == {"sub": USERNAME}


def test_login_as_the_docs_authorize_button_sends_it(start_probe_gateway: StartProbe) -> None:
    # Swagger UI's password flow: grant_type and an empty scope ride along with the form.
    gw = start_probe_gateway()
    form = {"grant_type": "password", "username": USERNAME, "password": PASSWORD, "scope": ""}
    response = gw.client.post(TOKEN, data=form)
    assert response.status_code == 200, response.text
    assert bearer(gw, response.json()["access_token"]).json() == {"sub": USERNAME}


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


def locks(pair: int, username: int) -> dict[str, int]:
    """The login locks: `pair` failures lock a (username, address) pair, `username` failures
    the username for the addresses that have not logged in as it; each for 60 s."""
    return {
        "LOGIN_MAX_FAILURES": pair,
        "LOGIN_USERNAME_MAX_FAILURES": username,
        "LOGIN_LOCKOUT_SECONDS": 60,
    }


def _xff(gw: Gateway, address: str, username: str = USERNAME, password: str = PASSWORD) -> Any:
    """A login as the reverse proxy passes it on: the test server trusts X-Forwarded-For
    from loopback (uvicorn's FORWARDED_ALLOW_IPS default), as `serve --proxy-headers` does."""
    form = {"username": username, "password": password}
    return gw.client.post(TOKEN, data=form, headers={"X-Forwarded-For": address})


def test_strangers_cannot_lock_the_bots_out(
    start_probe_gateway: StartProbe, fast_hash: str
) -> None:
    # Issue 17: five wrong passwords for the one username, each from another address, then
    # the right one from the bots' own address (which never logged in before) got 429.
    gw = start_probe_gateway(API_PASSWORD_HASH=fast_hash)
    for n in range(5):
        assert _xff(gw, f"203.0.113.{n}", password="wrong").status_code == 401
    assert _xff(gw, "198.51.100.7").status_code == 200


def test_username_lock_spares_addresses_that_logged_in(
    start_probe_gateway: StartProbe, fast_hash: str
) -> None:
    # CALLERS.md 2 (changes DECISIONS "Auth"): the username's failures from every address
    # lock it only for addresses that have not logged in as it lately.
    gw = start_probe_gateway(API_PASSWORD_HASH=fast_hash, **locks(pair=3, username=4))
    with _client_from(gw, "127.0.0.20") as bots:
        assert login(bots).status_code == 200  # the bots' address is known from now on
        # Four failures for one username, each from its own address: no pair is locked...
        for n in range(4):
            with _client_from(gw, f"127.0.0.{10 + n}") as client:
                assert login(client, password="wrong").status_code == 401
        # ...but the username is, for an address that never logged in as it,
        with _client_from(gw, "127.0.0.21") as stranger:
            _assert_throttled(login(stranger))  # even the right password waits
            assert 1 <= int(login(stranger).headers["retry-after"]) <= 60
            # (another username from that address is not affected)
            assert login(stranger, "other", "x").status_code == 401
        # ...and not for the bots' own address, again and again.
        for _ in range(3):
            assert login(bots).status_code == 200
        # The known address's own pair count still applies.
        for _ in range(3):
            assert login(bots, password="wrong").status_code == 401
        _assert_throttled(login(bots))


def test_throttle_per_username_and_address(start_probe_gateway: StartProbe, fast_hash: str) -> None:
    # CALLERS.md 2 (changes the old per-address lock): failures count per (username,
    # address). Three for one username from one address lock that pair only.
    gw = start_probe_gateway(
        API_PASSWORD_HASH=fast_hash, LOGIN_MAX_FAILURES=3, LOGIN_LOCKOUT_SECONDS=60
    )
    with _client_from(gw, "127.0.0.30") as client:
        for _ in range(3):
            assert login(client, password="wrong").status_code == 401
        _assert_throttled(login(client))
        # The same address with another username is its own pair.
        assert login(client, "guess", "wrong").status_code == 401
        # The username's name is case-insensitive for the count: no way around the lock.
        _assert_throttled(login(client, USERNAME.upper(), "wrong"))
    with _client_from(gw, "127.0.0.31") as client:
        assert login(client).status_code == 200


def test_each_lock_writes_one_warning(
    start_probe_gateway: StartProbe, fast_hash: str, caplog: pytest.LogCaptureFixture
) -> None:
    gw = start_probe_gateway(API_PASSWORD_HASH=fast_hash, **locks(pair=2, username=3))
    secret = "hunter2-not-the-password"
    with caplog.at_level(logging.WARNING, logger="isp_gateway.auth"):
        for _ in range(4):  # two failures lock the pair; two refusals log nothing more
            _xff(gw, "203.0.113.9", password=secret)
        _xff(gw, "203.0.113.10", password=secret)  # the username's third failure
        for _ in range(3):
            _xff(gw, "203.0.113.11", password=secret)
    lines = [r.getMessage() for r in caplog.records if r.name == "isp_gateway.auth"]
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name == "isp_gateway.auth")
    pair = [line for line in lines if "203.0.113.9" in line]
    assert len(pair) == 1 and USERNAME in pair[0] and "locked" in pair[0], lines
    username = [line for line in lines if "addresses that have not logged in" in line]
    assert len(username) == 1, lines
    assert len(lines) == 2, lines
    assert not any(secret in line or PASSWORD in line for line in caplog.messages)


def test_login_locks_hold_across_two_workers_on_redis(
    start_probe_gateway: StartProbe, fast_hash: str, redis_url: Callable[[int], str]
) -> None:
    url = redis_url(REDIS_DB)
    with emptied_redis(url):
        settings = {"API_PASSWORD_HASH": fast_hash, "REDIS_URL": url, **locks(pair=2, username=4)}
        first, second = start_probe_gateway(**settings), start_probe_gateway(**settings)
        assert _xff(first, "198.51.100.7").status_code == 200  # the bots, on worker one
        # A pair's failures split over the workers lock it on both.
        assert _xff(first, "203.0.113.1", password="wrong").status_code == 401
        assert _xff(second, "203.0.113.1", password="wrong").status_code == 401
        for worker in (first, second):
            _assert_throttled(_xff(worker, "203.0.113.1"))
        # The username's failures, from other addresses over both workers.
        assert _xff(second, "203.0.113.2", password="wrong").status_code == 401
        assert _xff(first, "203.0.113.3", password="wrong").status_code == 401
        for worker in (first, second):
            _assert_throttled(_xff(worker, "203.0.113.4"))
            # The bots' address logged in on worker one; worker two knows it too.
            assert _xff(worker, "198.51.100.7").status_code == 200


def test_success_resets_the_throttle(start_probe_gateway: StartProbe, fast_hash: str) -> None:
    gw = start_probe_gateway(API_PASSWORD_HASH=fast_hash, LOGIN_MAX_FAILURES=3)
    for _ in range(2):
        for _ in range(2):
            assert login(gw.client, password="wrong").status_code == 401
        assert login(gw.client).status_code == 200
    # 4 failures in total, but never 3 since the last success.
    assert login(gw.client, password="wrong").status_code == 401


def test_throttle_window_expires(start_probe_gateway: StartProbe, fast_hash: str) -> None:
    # 3 s: the locked attempt must come within the window, a margin a stalled test process
    # keeps.
    gw = start_probe_gateway(
        API_PASSWORD_HASH=fast_hash, LOGIN_MAX_FAILURES=2, LOGIN_LOCKOUT_SECONDS=3
    )
    for _ in range(2):
        assert login(gw.client, password="wrong").status_code == 401
    _assert_throttled(login(gw.client))
    # Attempts while locked never push the window back (its expiry is set once).
    wait_until(lambda: login(gw.client).status_code == 200, interval=0.05)
    assert login(gw.client).status_code == 200


def _failed_login_seconds(client: httpx.Client, runs: int) -> tuple[float, float]:
    """The fastest of `runs` failed logins of the configured user (wrong password) and of an
    unknown one, taken in turns: a stall of the machine only makes a request slower, so the
    minimum is its cost without interference, and the turns spread a slow phase over both."""
    known: list[float] = []
    unknown: list[float] = []
    for _ in range(runs):
        for username, times in ((USERNAME, known), ("nobody-here", unknown)):
            started = time.perf_counter()
            assert login(client, username, "wrong").status_code == 401
            times.append(time.perf_counter() - started)
    return min(known), min(unknown)


def test_unknown_user_costs_a_bcrypt_check(
    start_probe_gateway: StartProbe, shipped_hash: str
) -> None:
    gw = start_probe_gateway(API_PASSWORD_HASH=shipped_hash, LOGIN_MAX_FAILURES=100)
    # The configured hash is cost 12 (tens of ms at least). An unknown user must take bcrypt
    # time too, or timing tells which usernames exist.
    assert shipped_hash.startswith("$2b$12$")
    wrong_password, unknown_user = _failed_login_seconds(gw.client, runs=5)
    assert wrong_password >= 0.02
    assert unknown_user >= 0.02
    assert unknown_user >= wrong_password / 4


def test_dummy_hash_matches_the_configured_cost(fast_hash: str, shipped_hash: str) -> None:
    # Same cost, same time: a cost-12 dummy against a cost-4 real hash would expose users.
    assert dummy_hash(fast_hash).startswith("$2b$04$")
    assert dummy_hash(shipped_hash).startswith("$2b$12$")
    assert dummy_hash("not a bcrypt hash").startswith("$2b$12$")


def test_unknown_user_timing_with_a_cheap_hash(
    start_probe_gateway: StartProbe, fast_hash: str
) -> None:
    gw = start_probe_gateway(API_PASSWORD_HASH=fast_hash, LOGIN_MAX_FAILURES=100)
    login(gw.client, "warm-up", "x")
    wrong_password, unknown_user = _failed_login_seconds(gw.client, runs=7)
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
