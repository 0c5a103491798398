"""`check-config --probe`: reach what the settings name, not only read them.

One cheap call each, all at once: the upstream (one page of one client, with the real key),
Redis (REDIS_URL) or every sentinel of REDIS_SENTINELS and the master they name, and the
API keys file. One line a check; every failure named, exit 1 on any. No secret is printed:
Redis URLs are shown without their password, the upstream key never.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio as aioredis
from redis.exceptions import AuthenticationError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from isp_gateway.settings import Settings
from isp_gateway.store.health import address, redacted_url
from isp_gateway.store.redis import one_try
from isp_gateway.upstream.clients import CLIENTS_PATH
from isp_gateway.upstream.gateway import build_http_client


@dataclass(frozen=True)
class Check:
    what: str  # "upstream https://...", "sentinel 10.0.0.5:26379", ...
    ok: bool
    detail: str


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- the upstream ---------------------------------------------------------------------------


def _page_count(response: httpx.Response) -> str | None:
    """'N clients' when the answer is the API's page of clients, else None."""
    try:
        body: Any = response.json()
    except ValueError:
        return None
    if isinstance(body, list):
        return f"{len(body)} clients"
    if isinstance(body, dict) and isinstance(body.get("results"), list):
        count = body.get("count")
        return f"{count} clients" if isinstance(count, int) else "count not given"
    return None


async def probe_upstream(settings: Settings) -> Check:
    what = f"upstream {settings.UPSTREAM_NET_HOST}"
    timeout = settings.UPSTREAM_TIMEOUT_SECONDS
    async with build_http_client(settings) as http:
        try:
            response = await http.get(CLIENTS_PATH, params={"limit": 1, "offset": 0})
        except httpx.TimeoutException:
            return Check(what, False, f"no answer within {timeout:g} s (UPSTREAM_TIMEOUT_SECONDS)")
        except httpx.HTTPError as exc:
            return Check(what, False, f"unreachable ({_reason(exc)})")
    status = response.status_code
    if 200 <= status < 300:
        counted = _page_count(response)
        if counted is None:
            return Check(
                what,
                False,
                f"answered {status} with something that is not the API's page of clients "
                "(a proxy or a login page?)",
            )
        return Check(what, True, f"accepted our key, read one client ({counted})")
    if status in (401, 403):
        return Check(what, False, f"refused our key ({status}): check UPSTREAM_NET_KEY")
    if status == 429:
        # The key was accepted; the backend only asks us to slow down.
        retry = response.headers.get("Retry-After", "?")
        return Check(what, True, f"answered 429 (rate limited now, Retry-After {retry}); key kept")
    if status == 404:
        return Check(
            what,
            False,
            f"answered 404 for /{CLIENTS_PATH}: is UPSTREAM_NET_HOST the backend's base address?",
        )
    if 300 <= status < 400:
        location = response.headers.get("Location", "?")
        return Check(
            what,
            False,
            f"answered {status}, a redirect to {location}: set UPSTREAM_NET_HOST to the final "
            "address (writes are never redirected)",
        )
    return Check(what, False, f"answered {status}")


# -- Redis ----------------------------------------------------------------------------------


def _redis_failure(exc: BaseException, password_setting: str, timeout: float) -> str:
    if isinstance(exc, AuthenticationError):
        return f"refused the password ({password_setting})"
    if isinstance(exc, ResponseError) and "NOAUTH" in str(exc):
        return f"asks for a password ({password_setting} has none)"
    if isinstance(exc, RedisTimeoutError | TimeoutError):
        return f"no answer within {timeout:g} s (REDIS_TIMEOUT_SECONDS)"
    if isinstance(exc, RedisConnectionError | OSError):
        return f"unreachable ({_reason(exc)})"
    return _reason(exc)


async def _role(client: aioredis.Redis) -> str:
    await client.ping()
    role: Any = await client.role()
    first = role[0] if isinstance(role, list | tuple) and role else role
    return first.decode() if isinstance(first, bytes) else str(first)


async def _probe_master(
    what: str, client: aioredis.Redis, password_setting: str, timeout: float
) -> Check:
    try:
        role = await _role(client)
    except Exception as exc:
        return Check(what, False, _redis_failure(exc, password_setting, timeout))
    finally:
        await client.aclose()
    if role != "master":
        return Check(what, False, f"answers as a {role}, read-only: writes would fail")
    return Check(what, True, "answers as the master")


async def probe_redis_url(settings: Settings) -> list[Check]:
    assert settings.REDIS_URL is not None
    url = settings.REDIS_URL.get_secret_value()
    timeout = settings.REDIS_TIMEOUT_SECONDS
    client = aioredis.Redis.from_url(
        url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=one_try()
    )
    return [await _probe_master(f"Redis {redacted_url(url)}", client, "REDIS_URL", timeout)]


async def _ask_sentinel(
    host: str, port: int, settings: Settings
) -> tuple[Check, tuple[str, int] | None]:
    name = settings.REDIS_SENTINEL_MASTER
    timeout = settings.REDIS_TIMEOUT_SECONDS
    what = f"sentinel {address(host, port)}"
    password = settings.REDIS_SENTINEL_PASSWORD
    client = aioredis.Redis(
        host=host,
        port=port,
        password=None if password is None else password.get_secret_value(),
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=one_try(),
    )
    try:
        state: Any = await client.sentinel_master(name)
    except ResponseError as exc:
        if "no such master" in str(exc).lower():
            return Check(what, False, f"knows no master named {name!r}"), None
        return Check(what, False, _redis_failure(exc, "REDIS_SENTINEL_PASSWORD", timeout)), None
    except Exception as exc:
        return Check(what, False, _redis_failure(exc, "REDIS_SENTINEL_PASSWORD", timeout)), None
    finally:
        await client.aclose()
    master = (str(state["ip"]), int(state["port"]))
    flags = str(state.get("flags", ""))
    where = address(*master)
    if "s_down" in flags or "o_down" in flags:
        return Check(what, False, f"sees master {name!r} at {where} as down ({flags})"), None
    return Check(what, True, f"names master {name!r} at {where}"), master


async def probe_sentinels(settings: Settings) -> list[Check]:
    answers = await asyncio.gather(
        *(_ask_sentinel(host, port, settings) for host, port in settings.REDIS_SENTINELS)
    )
    checks = [check for check, _ in answers]
    named = [master for _, master in answers if master is not None]
    name = settings.REDIS_SENTINEL_MASTER
    if not named:
        checks.append(Check(f"Redis master {name!r}", False, "no sentinel named it"))
        return checks
    # The address most sentinels give (they may disagree for a moment during a failover).
    master = max(set(named), key=named.count)
    if len(set(named)) > 1:
        others = ", ".join(address(*m) for m in sorted(set(named)) if m != master)
        checks.append(
            Check("sentinels", False, f"disagree on the master: {address(*master)} and {others}")
        )
    timeout = settings.REDIS_TIMEOUT_SECONDS
    password = settings.REDIS_PASSWORD
    client = aioredis.Redis(
        host=master[0],
        port=master[1],
        password=None if password is None else password.get_secret_value(),
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=one_try(),
    )
    what = f"Redis master {name!r} at {address(*master)}"
    checks.append(await _probe_master(what, client, "REDIS_PASSWORD", timeout))
    return checks


# -- the API keys file ----------------------------------------------------------------------


def probe_keys_file(path: Path) -> Check:
    """Read as the service reads it (its own reader, auth/keys.py): run the probe as the
    service's user, since a file another user made may be unreadable to it."""
    from isp_gateway.auth import keys

    what = f"API_KEYS_FILE {path}"
    if not path.exists() and not path.is_symlink():
        if path.parent.is_dir():
            return Check(what, True, "not created yet: no keys until `isp-gateway keys create`")
        return Check(what, False, f"its directory {path.parent} does not exist")
    try:
        entries = keys.read_key_entries(path)
    except keys.KeyFileError as exc:
        return Check(what, False, str(exc).removeprefix(f"{path}: ").removeprefix(f"{path} "))
    return Check(what, True, f"readable, {len(entries)} key{'s' if len(entries) != 1 else ''}")


# -- all of them ----------------------------------------------------------------------------


async def probe(settings: Settings) -> list[Check]:
    """Every check, in the order printed: the upstream, the store, the API keys file."""
    if settings.REDIS_URL is not None:
        store = probe_redis_url(settings)
    elif settings.REDIS_SENTINELS:
        store = probe_sentinels(settings)
    else:
        store = _memory_store()
    upstream, stored = await asyncio.gather(probe_upstream(settings), store)
    if settings.API_KEYS_FILE is None:
        keys_file = Check("API keys", True, "off (no API_KEYS_FILE)")
    else:
        keys_file = probe_keys_file(settings.API_KEYS_FILE)
    return [upstream, *stored, keys_file]


async def _memory_store() -> list[Check]:
    return [Check("store", True, "memory, this process only (no REDIS_URL or REDIS_SENTINELS)")]


def run_probe(settings: Settings) -> int:
    """Print one line a check; 0 when all passed, else 1 with the failures named on stderr."""
    checks = asyncio.run(probe(settings))
    for check in checks:
        print(f"{'ok  ' if check.ok else 'FAIL'}  {check.what}: {check.detail}")
    failed = [check.what for check in checks if not check.ok]
    if failed:
        print(f"isp-gateway: probe failed: {'; '.join(failed)}", file=sys.stderr)
        return 1
    print("probe OK")
    return 0
