"""Redis Sentinel for the Redis store (redis.py): the master a replicated Redis is found
at, followed across a failover."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, cast

import redis.asyncio as aioredis
from redis.asyncio.sentinel import MasterNotFoundError, Sentinel, SentinelManagedConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from isp_gateway.store.health import address

log = logging.getLogger("isp_gateway.store")


class FollowingConnection(SentinelManagedConnection):
    """A connection to the master that asks the sentinels where it is whenever it
    reconnects. redis-py (8.1) reconnects a connection dropped inside a command's retries
    at the address it had (`send_packed_command`), not through the sentinel lookup of its
    `connect`: the retries after a READONLY, or after the master died, went back to the old
    master, and only the next command found the new one."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not self.is_connected:
            await self.connect()  # type: ignore[no-untyped-call]  # redis-py: untyped
        await super().send_packed_command(command, check_health)


class Sentinels(Sentinel):
    """redis-py's Sentinel with a discovery that holds when several run at once (a failover
    makes every connection rediscover). redis-py's walks its list of sentinels while other
    discoveries reorder it (the one that answered moves to the front, swapped by positions
    read before awaiting): with the first sentinel down, 19 of 20 discoveries at once found
    no master although another sentinel answered, and the list could lose a sentinel and
    hold another twice (the lost one never asked again, nor closed). Here each discovery
    walks a copy, and the sentinel that answered moves to the front by identity."""

    def __init__(self, sentinels: list[tuple[str, int]], **kwargs: Any) -> None:
        super().__init__(sentinels, **kwargs)  # type: ignore[no-untyped-call]  # untyped
        self.clients: tuple[aioredis.Redis, ...] = tuple(self.sentinels)
        # The master's address as last discovered (None before the first discovery).
        self.master_address: tuple[str, int] | None = None

    def _found(self, service_name: str, found: tuple[str, int]) -> None:
        """Remember the master's address; a new one is a failover: one WARNING naming it
        (every new connection rediscovers, so only the first to see it logs)."""
        before, self.master_address = self.master_address, found
        if before is not None and before != found:
            log.warning(
                "Redis Sentinel: master %r moved to %s (was %s)",
                service_name,
                address(*found),
                address(*before),
            )

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        away = 0
        for sentinel in list(self.sentinels):
            try:
                # A dict by master name (RESP2, this client's protocol).
                masters = cast(dict[str, Any], await sentinel.sentinel_masters())
            except (RedisConnectionError, RedisTimeoutError):
                away += 1
                continue
            state = masters.get(service_name)
            if state and self.check_master_state(state, service_name):
                self.sentinels.remove(sentinel)
                self.sentinels.insert(0, sentinel)
                found = (str(state["ip"]), int(state["port"]))
                self._found(service_name, found)
                return found
        raise MasterNotFoundError(
            f"no sentinel answered with a master named {service_name!r} that is up "
            f"({away} of {len(self.clients)} sentinels did not answer)"
        )


@dataclass(frozen=True)
class SentinelMaster:
    """A master found through Redis Sentinel: the sentinels' addresses, the master's name
    in them, the master's password and the sentinels' own."""

    sentinels: tuple[tuple[str, int], ...]
    name: str
    password: str | None = field(default=None, repr=False)
    sentinel_password: str | None = field(default=None, repr=False)
