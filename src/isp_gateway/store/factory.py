"""The store the settings name, built in one place: for the service (services.py) and for
`check-config --probe` (cli/serve.py), which must reach the same Redis the service would."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pydantic import SecretStr

from isp_gateway.settings import Settings
from isp_gateway.store.memory import MemoryStore

if TYPE_CHECKING:
    from isp_gateway.kit.storage import Store
    from isp_gateway.store.redis import RedisStore

log = logging.getLogger("isp_gateway")


def redis_store(settings: Settings) -> RedisStore:
    """The Redis store the settings name: REDIS_URL, or the master REDIS_SENTINELS find."""
    from isp_gateway.store.redis import RedisStore, SentinelMaster

    timeout = settings.REDIS_TIMEOUT_SECONDS
    if settings.REDIS_URL is not None:
        return RedisStore(settings.REDIS_URL.get_secret_value(), timeout=timeout)
    if settings.REDIS_SENTINEL_MASTER is None:  # the settings refuse it; for the type
        raise ValueError("REDIS_SENTINELS without REDIS_SENTINEL_MASTER")
    master = SentinelMaster(
        tuple(settings.REDIS_SENTINELS),
        settings.REDIS_SENTINEL_MASTER,
        password=_secret(settings.REDIS_PASSWORD),
        sentinel_password=_secret(settings.REDIS_SENTINEL_PASSWORD),
    )
    return RedisStore(timeout=timeout, sentinel=master)


def _secret(value: SecretStr | None) -> str | None:
    return None if value is None else value.get_secret_value()


async def build_store(settings: Settings) -> Store:
    """The store, named in the log (issue 28: the logs never said which one was in use)."""
    if settings.uses_redis:
        store = redis_store(settings)
        await store.ping()
        log.info("store: %s", store.describe())
        return store
    log.info("store: memory, this process only (REDIS_URL or REDIS_SENTINELS share it)")
    return MemoryStore()
